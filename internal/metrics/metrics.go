// Package metrics holds Sluice's Prometheus metrics, registered on the
// default registry that GET /metrics serves.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// registered is every collector this package registers, in order: what
// its test compares with the metrics docs/monitoring.md lists.
var registered []prometheus.Collector

// recorder registers on the default registry, which GET /metrics serves,
// and keeps what it registered.
type recorder struct{ prometheus.Registerer }

func (r recorder) Register(c prometheus.Collector) error {
	registered = append(registered, c)
	return r.Registerer.Register(c) //nolint:wrapcheck // the default registry's own error
}

func (r recorder) MustRegister(cs ...prometheus.Collector) {
	registered = append(registered, cs...)
	r.Registerer.MustRegister(cs...)
}

// auto makes and registers this package's metrics.
var auto = promauto.With(recorder{prometheus.DefaultRegisterer})

var (
	// PollWaiting is how many poll reads (?wait=) wait for deliveries in
	// this process.
	PollWaiting = auto.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_poll_waiting",
		Help: "Poll reads waiting for deliveries in this process.",
	})
	// PollDelivered counts poll endpoints' deliveries marked delivered by
	// a read that passed them.
	PollDelivered = auto.NewCounter(prometheus.CounterOpts{
		Name: "sluice_poll_delivered_total",
		Help: "Deliveries of poll endpoints read past, and so delivered.",
	})
	// EventsIngested counts events accepted by the API.
	EventsIngested = auto.NewCounter(prometheus.CounterOpts{
		Name: "sluice_events_ingested_total",
		Help: "Events accepted by the API.",
	})
	// Attempts counts delivery attempts by outcome: delivered, failed,
	// throttled (429) or dead (the last attempt failed).
	Attempts = auto.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_delivery_attempts_total",
		Help: "Delivery attempts by outcome.",
	}, []string{"outcome"})
	// AttemptSeconds is the latency of delivery attempts.
	AttemptSeconds = auto.NewHistogram(prometheus.HistogramOpts{
		Name:    "sluice_delivery_attempt_seconds",
		Help:    "Latency of delivery attempts, from request to response head.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
	})
	// CircuitTransitions counts circuits opened and closed.
	CircuitTransitions = auto.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_circuit_transitions_total",
		Help: "Circuit breaker transitions by kind (opened, closed).",
	}, []string{"kind"})
	// JobErrors counts background runs that failed (and are retried), by
	// kind: fanout, dispatch, sweep, replay.
	JobErrors = auto.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_job_errors_total",
		Help: "Failed runs of background jobs by kind; they are retried.",
	}, []string{"kind"})
	// JobsReplaced counts fan-out, dispatch and replay jobs replaced because
	// their run had died (a killed worker, a broken database connection):
	// the sweeper's jobs.ReplaceDead, not River's rescuer.
	JobsReplaced = auto.NewCounter(prometheus.CounterOpts{
		Name: "sluice_jobs_replaced_total",
		Help: "Fan-out, dispatch and bulk replay jobs replaced because their run died.",
	})
	// DispatchBatches counts the batches dispatch runs sent, by where they
	// came from: "claimed" from the database, or "handed" over by a post in
	// the same process.
	DispatchBatches = auto.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_dispatch_batches_total",
		Help: "Batches of deliveries sent by dispatch runs, by source: claimed, or handed over by a post in the same process.",
	}, []string{"source"})
	// FirstAttemptLag is the time from an event's acceptance to the first
	// attempt of each of its deliveries (replays excluded).
	FirstAttemptLag = auto.NewHistogram(prometheus.HistogramOpts{
		Name:    "sluice_event_first_attempt_lag_seconds",
		Help:    "Time from an event's acceptance to the first attempt of each of its deliveries.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14),
	})
	// APIRequests counts API requests by route pattern and status.
	APIRequests = auto.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_api_requests_total",
		Help: "API requests by route pattern (e.g. /v1/endpoints/{id}) and status code.",
	}, []string{"route", "status"})
	// APISeconds is the latency of API requests by route pattern.
	APISeconds = auto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sluice_api_request_seconds",
		Help:    "Latency of API requests by route pattern.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 12),
	}, []string{"route"})
)

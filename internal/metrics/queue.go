package metrics

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

var (
	dueDesc = prometheus.NewDesc("sluice_deliveries_due",
		"Deliveries due now: pending, or failed and past their retry time.", nil, nil)
	oldestDesc = prometheus.NewDesc("sluice_oldest_due_delivery_age_seconds",
		"How long ago the longest-waiting due delivery came due (0 when none is).", nil, nil)
	endpointsDesc = prometheus.NewDesc("sluice_endpoints",
		"Endpoints by status: active, throttled, circuit_open, disabled.", []string{"state"}, nil)
	scrapeErrDesc = prometheus.NewDesc("sluice_queue_stats_up",
		"1 if the queue's state could be read from the database at this scrape.", nil, nil)
)

// endpointStates are always reported, at 0 when no endpoint is in them.
var endpointStates = []string{"active", "throttled", "circuit_open", "disabled"}

// QueueCollector reports the delivery queue's state, read from the
// database at each scrape: the same numbers from any process, whatever
// worker holds which endpoint.
type QueueCollector struct {
	store *store.Store
}

// NewQueueCollector returns a collector reading st. The process registers
// it (package app), so docs_test.go builds it to see its metrics.
func NewQueueCollector(st *store.Store) *QueueCollector { return &QueueCollector{store: st} }

// Describe implements prometheus.Collector.
func (c *QueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- dueDesc
	ch <- oldestDesc
	ch <- endpointsDesc
	ch <- scrapeErrDesc
}

// Collect implements prometheus.Collector.
func (c *QueueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.read(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(scrapeErrDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrDesc, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(dueDesc, prometheus.GaugeValue, float64(st.Due))
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, st.OldestDueAge.Seconds())
	for _, state := range endpointStates {
		ch <- prometheus.MustNewConstMetric(endpointsDesc, prometheus.GaugeValue, float64(st.EndpointsByState[state]), state)
	}
}

// queueStats is the state of all endpoints' queues at one moment.
type queueStats struct {
	// Due is the number of deliveries due now (pending or waiting to retry).
	Due int64
	// OldestDueAge is how long ago the longest-waiting of them came due
	// (zero if none).
	OldestDueAge time.Duration
	// EndpointsByState counts endpoints by status: active, throttled,
	// circuit_open, disabled.
	EndpointsByState map[string]int64
}

// read reads the queue's state.
func (c *QueueCollector) read(ctx context.Context) (queueStats, error) {
	var due dbq.DueDeliveryStatsRow
	var rows []dbq.EndpointsByStateRow
	err := c.store.InTx(ctx, func(tx store.Tx) error {
		var err error
		if due, err = tx.Q.DueDeliveryStats(ctx); err != nil {
			return fmt.Errorf("due deliveries: %w", err)
		}
		if rows, err = tx.Q.EndpointsByState(ctx); err != nil {
			return fmt.Errorf("endpoints by state: %w", err)
		}
		return nil
	})
	if err != nil {
		return queueStats{}, err
	}
	st := queueStats{Due: due.Due, OldestDueAge: time.Duration(due.OldestAgeSeconds * float64(time.Second)),
		EndpointsByState: map[string]int64{}}
	for _, r := range rows {
		st.EndpointsByState[r.State] = r.N
	}
	return st, nil
}

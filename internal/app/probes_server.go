package app

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// probes answers the probes of one process: /healthz, /readyz and
// /metrics, as the API answers its own.
type probes struct {
	ping     func(context.Context) error
	timeout  time.Duration
	gatherer prometheus.Gatherer
	// noMetrics leaves /metrics out: it has a listener of its own
	// (SLUICE_METRICS_ADDR).
	noMetrics bool
	draining  atomic.Bool
}

// newProbes returns the probes of a process: ping tells whether its database
// answers, and one that has not answered within timeout (zero: 5 s) makes
// /readyz answer 503; gatherer (nil: the Prometheus default registry)
// serves /metrics.
func newProbes(ping func(context.Context) error, timeout time.Duration, gatherer prometheus.Gatherer) *probes {
	if gatherer == nil {
		gatherer = prometheus.DefaultGatherer
	}
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &probes{ping: ping, timeout: timeout, gatherer: gatherer}
}

// Drain makes /readyz answer 503 from now on: the process is stopping.
func (s *probes) Drain() { s.draining.Store(true) }

// Handler serves GET /healthz (the process is up: 200 with its version),
// GET /readyz (200, or 503 while stopping or while the database does not
// answer within the timeout) and GET /metrics (unless it has a listener of
// its own); anything else is 404.
func (s *probes) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeProbe(w, http.StatusOK, "application/json", map[string]string{"status": "ok", "version": sluice.VersionString()})
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	if !s.noMetrics {
		mux.Handle("GET /metrics", promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{}))
	}
	return mux
}

// metricsHandler serves GET /metrics alone, on SLUICE_METRICS_ADDR.
func metricsHandler(g prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	return mux
}

func (s *probes) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	detail := ""
	switch {
	case s.draining.Load():
		detail = "shutting down"
	case s.ping(ctx) != nil:
		detail = "database unreachable"
	default:
		writeProbe(w, http.StatusOK, "application/json", map[string]string{"status": "ok", "version": sluice.VersionString()})
		return
	}
	w.Header().Set("Retry-After", "1")
	writeProbe(w, http.StatusServiceUnavailable, "application/problem+json", map[string]any{
		"type": "https://sluice.dev/problems/unavailable", "title": "Not ready",
		"status": http.StatusServiceUnavailable, "detail": detail,
	})
}

func writeProbe(w http.ResponseWriter, status int, contentType string, v any) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

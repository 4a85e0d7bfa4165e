package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/sluice-dev/sluice/internal/store"
)

// probeListener is /healthz, /readyz and /metrics on SLUICE_HEALTH_ADDR,
// for a process without the API role (which serves them on SLUICE_ADDR).
type probeListener struct {
	ln     net.Listener
	probes *probes
}

// listenProbes binds addr now, so that a bad or busy address stops the
// process at start. withMetrics is false when /metrics has a listener of
// its own (SLUICE_METRICS_ADDR).
func listenProbes(addr string, st *store.Store, dbTimeout time.Duration, withMetrics bool) (*probeListener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	// The default registry holds this process's own metrics (attempts,
	// latency, job errors); the queue gauges, read from the database, are
	// left to the API's /metrics.
	pr := newProbes(st.Ping, dbTimeout, nil)
	pr.noMetrics = !withMetrics
	return &probeListener{ln: ln, probes: pr}, nil
}

// serve answers the probes until ctx ends; from then on /readyz answers
// 503 until the listener closes.
func (p *probeListener) serve(ctx context.Context, logger *slog.Logger) error {
	paths := "/healthz /readyz /metrics"
	if p.probes.noMetrics {
		paths = "/healthz /readyz"
	}
	return serveOn(ctx, p.ln, p.probes.Handler(), logger.With("probes", paths), p.probes.Drain)
}

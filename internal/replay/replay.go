// Package replay sends deliveries again: one delivery replayed (Delivery)
// or made due now (Retry), or an endpoint's matching deliveries replayed in
// bulk (Endpoint). A bulk replay stages its deliveries and a River worker
// finishes it, a chunk per transaction, queueing the endpoint's dispatch
// job as each chunk commits.
package replay

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/store"
)

// Timeout is the longest one run may take. A run cut short keeps the
// chunks it committed; the retry goes on from there.
const Timeout = 10 * time.Minute

// Worker runs jobs.ReplayArgs.
type Worker struct {
	river.WorkerDefaults[jobs.ReplayArgs]
	store  *store.Store
	nudger *dispatch.Nudger
	leases *jobs.LeaseHolder
	logger *slog.Logger
}

// NewWorker returns a replay worker on st, whose runs queue their
// endpoints' dispatch and their own next chunk with nudger (the process's;
// required). Each run holds a lease on leases (nil: none), so that the
// sweeper replaces the job within seconds if the process dies mid-run,
// instead of River's rescuer much later.
func NewWorker(st *store.Store, nudger *dispatch.Nudger, leases *jobs.LeaseHolder, logger *slog.Logger) *Worker {
	return &Worker{store: st, nudger: nudger, leases: leases, logger: logger}
}

// Timeout implements river.Worker.
func (w *Worker) Timeout(*river.Job[jobs.ReplayArgs]) time.Duration { return Timeout }

// NextRetry implements river.Worker: a run fails only when the database
// does, and the request's deliveries wait for it, so it is retried within
// seconds.
func (w *Worker) NextRetry(job *river.Job[jobs.ReplayArgs]) time.Time {
	return time.Now().Add(jobs.Backoff(job.Attempt))
}

// Work replays the request's staged deliveries. A run whose lease is lost
// (its connection broke) may go on beside the job that replaces it: Run
// is safe to run twice at once.
func (w *Worker) Work(ctx context.Context, job *river.Job[jobs.ReplayArgs]) error {
	err := w.run(ctx, job)
	if err != nil {
		metrics.JobErrors.WithLabelValues("replay").Inc()
		w.logger.WarnContext(ctx, "bulk replay failed; retrying soon",
			"job_id", job.ID, "request_id", job.Args.RequestID, "attempt", job.Attempt, "err", err)
	}
	return err
}

func (w *Worker) run(ctx context.Context, job *river.Job[jobs.ReplayArgs]) error {
	if w.leases != nil {
		held, err := w.leases.Acquire(ctx, job.ID)
		if err != nil {
			return fmt.Errorf("take lease: %w", err)
		}
		defer held.Release()
	}
	return Run(ctx, w.store, job.Args, w.nudger)
}

// Run replays a request's staged deliveries Chunk at a time
// until none is left. Each chunk commits with its progress, so Run may be
// cut short and run again, or run twice at once, and still replays each
// staged delivery once.
func Run(ctx context.Context, st *store.Store, args jobs.ReplayArgs, nudger dispatch.TxNudger) error {
	for {
		finished, err := Staged(ctx, st, args.RequestID, args.EndpointID, Chunk, nudger)
		if err != nil || finished {
			return err
		}
	}
}

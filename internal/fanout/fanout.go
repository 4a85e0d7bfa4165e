// Package fanout turns events into deliveries, one per endpoint an event
// reaches, and hands the endpoints whose queues changed to dispatch.
//
//   - Routing (routing.go, the one place it is decided): an event goes to
//     the endpoints with a subscription matching its type, and its payload
//     when the subscription has a filter, among the tenant's own
//     endpoints; to its consumer's endpoints alone when it names a
//     consumer; to every endpoint when it is a broadcast. Postgres
//     evaluates the filters, compiled to jsonpath (internal/filter), in
//     the routing statements themselves.
//   - Planning (plan.go): a group's deliveries per tenant, one routing
//     query and one insert each. Coalescing: an event with a coalesce key
//     takes over the queued, never-attempted delivery of an older event
//     with the same endpoint, type and key instead of adding one.
//   - Inserting (insert.go): posted events stored with their deliveries in
//     the post's own commit, a small group as one statement; coalesced
//     events, very wide groups and single events with an Idempotency-Key
//     (InsertOne) are left to the River Worker (Events).
//
// Dispatch receives the endpoints whose queues changed after the commit
// (dispatch.Nudger.Nudge). Fan-out runs its queries
// in a store.Tx, with the planner settings store gives routing
// transactions (store.Store.InRoutingTx).
package fanout

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/store"
)

// Worker runs jobs.FanoutArgs: the fan-out of events left to a job
// (coalesced events, very wide groups, events with an Idempotency-Key), and
// wakes the endpoints' lingering dispatch runs or queues their dispatch
// jobs.
type Worker struct {
	river.WorkerDefaults[jobs.FanoutArgs]
	store  *store.Store
	nudger *dispatch.Nudger
	leases *jobs.LeaseHolder
	logger *slog.Logger
}

// NewWorker returns a fan-out worker on st that nudges the endpoints it
// made deliveries for through nudger. Each run holds a lease on leases
// (nil: none), so that the sweeper replaces the job at once if the process
// dies mid-run.
func NewWorker(st *store.Store, nudger *dispatch.Nudger, leases *jobs.LeaseHolder, logger *slog.Logger) *Worker {
	return &Worker{store: st, nudger: nudger, leases: leases, logger: logger}
}

// Timeout implements river.Worker: a fan-out's work grows with its events.
func (w *Worker) Timeout(job *river.Job[jobs.FanoutArgs]) time.Duration {
	return Timeout(len(job.Args.EventIDs))
}

// Timeout is the longest a fan-out of n events may take.
func Timeout(n int) time.Duration {
	return 30*time.Second + time.Duration(n)*20*time.Millisecond
}

// NextRetry implements river.Worker: a fan-out fails only when the database
// does, so it is retried within seconds.
func (w *Worker) NextRetry(job *river.Job[jobs.FanoutArgs]) time.Time {
	return time.Now().Add(jobs.Backoff(job.Attempt))
}

// Work fans the job's events out and completes the job in the same
// transaction, so a crash can never leave the deliveries without the job
// being done, or the job done without the deliveries; then it nudges the
// endpoints (dispatch.Nudger.Nudge says why afterwards).
func (w *Worker) Work(ctx context.Context, job *river.Job[jobs.FanoutArgs]) error {
	err := w.fanOut(ctx, job)
	if err != nil {
		metrics.JobErrors.WithLabelValues("fanout").Inc()
		w.logger.WarnContext(ctx, "fan-out failed; retrying soon",
			"job_id", job.ID, "events", len(job.Args.EventIDs), "attempt", job.Attempt, "err", err)
	}
	return err
}

func (w *Worker) fanOut(ctx context.Context, job *river.Job[jobs.FanoutArgs]) error {
	if w.leases != nil {
		held, err := w.leases.Acquire(ctx, job.ID)
		if err != nil {
			return fmt.Errorf("take lease: %w", err)
		}
		defer held.Release()
	}
	touched, _, err := Events(ctx, w.store, job.Args.EventIDs, func(ctx context.Context, tx pgx.Tx) error {
		return jobs.Complete(ctx, tx, job)
	})
	if err != nil {
		return err
	}
	if err := w.nudger.Nudge(ctx, touched); err != nil {
		// The job is complete; the sweeper's walk nudges them (every 5 s).
		w.logger.WarnContext(ctx, "fan-out could not nudge dispatch", "err", err, "endpoints", len(touched))
	}
	return nil
}

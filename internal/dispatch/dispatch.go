// Package dispatch sends each endpoint's queued deliveries. One River job per
// endpoint (jobs.DispatchArgs, unique while queued or running) claims that
// endpoint's due deliveries in batches of at most max_in_flight, sends them
// concurrently, records every attempt, and ends when nothing is due — in
// the same transaction that re-checks the queue with the endpoint row locked
// against fan-out, so no delivery is ever left without a dispatcher. Retries
// that come due later are picked up by the sweeper (sweep.go).
package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/sender"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// Config tunes the dispatcher.
type Config struct {
	Sender *sender.Sender
	// DeliveryTimeout bounds one request; it sizes the job's timeout.
	DeliveryTimeout time.Duration
	// Retry is the schedule of waits between attempts; after len+1 failed
	// attempts a delivery is dead.
	Retry Retry
	// Budget is how long one job run keeps sending before it yields its
	// worker slot and is queued again (default 5s).
	Budget time.Duration
	Logger *slog.Logger
}

// Worker runs jobs.DispatchArgs.
type Worker struct {
	river.WorkerDefaults[jobs.DispatchArgs]
	store *store.Store
	cfg   Config
}

// NewWorker returns a dispatch worker.
func NewWorker(st *store.Store, cfg Config) *Worker {
	if cfg.Budget == 0 {
		cfg.Budget = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Worker{store: st, cfg: cfg}
}

// JobTimeout is the longest one dispatch run may take: its budget plus one
// last batch of requests. River's rescuer must wait longer than this.
func (cfg Config) JobTimeout() time.Duration {
	return cfg.Budget + cfg.DeliveryTimeout + 5*time.Second
}

// Timeout implements river.Worker.
func (w *Worker) Timeout(*river.Job[jobs.DispatchArgs]) time.Duration { return w.cfg.JobTimeout() }

// Work sends the endpoint's due deliveries until none is due or the budget
// is spent.
func (w *Worker) Work(ctx context.Context, job *river.Job[jobs.DispatchArgs]) error {
	endpointID := job.Args.EndpointID
	deadline := time.Now().Add(w.cfg.Budget)
	for time.Now().Before(deadline) {
		target, claimed, err := w.store.Claim(ctx, endpointID, func(t store.Target) int {
			if t.Disabled {
				return 0
			}
			return t.MaxInFlight
		})
		if errors.Is(err, sluice.ErrNotFound) {
			return nil // endpoint deleted, and its deliveries with it
		}
		if err != nil {
			return err
		}
		if target.Disabled {
			return nil // the sweeper wakes it when it is enabled again
		}
		if len(claimed) == 0 {
			if w.waitForSoonDue(ctx, endpointID, deadline) {
				continue
			}
			finished, err := w.store.FinishDispatch(ctx, endpointID, completeJob(job))
			if err != nil || finished {
				return err
			}
			continue // something became due while we looked
		}
		if err := w.store.RecordOutcomes(ctx, w.sendBatch(ctx, target, claimed)); err != nil {
			return err
		}
	}
	return river.JobSnooze(0) // budget spent: queue again behind other work
}

// soon is how far ahead a due retry keeps a dispatch run waiting for it,
// rather than ending and leaving it to the sweeper.
const soon = time.Second

// waitForSoonDue sleeps until the endpoint's next queued delivery is due if
// that is soon and within the run's deadline, and reports whether it did.
func (w *Worker) waitForSoonDue(ctx context.Context, endpointID uuid.UUID, deadline time.Time) bool {
	next, err := w.store.NextDueAt(ctx, endpointID)
	if err != nil || next == nil {
		return false
	}
	wait := time.Until(*next)
	if wait > soon || time.Now().Add(wait).After(deadline) {
		return false
	}
	select {
	case <-time.After(wait):
		return true
	case <-ctx.Done():
		return false
	}
}

func completeJob(job *river.Job[jobs.DispatchArgs]) store.TxHook {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	}
}

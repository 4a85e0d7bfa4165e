// Package fanout is the River worker that turns stored events into
// deliveries, one per subscribed endpoint, and wakes those endpoints'
// dispatchers.
package fanout

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/store"
)

// Worker runs jobs.FanoutArgs.
type Worker struct {
	river.WorkerDefaults[jobs.FanoutArgs]
	store  *store.Store
	waker  *dispatch.Waker
	logger *slog.Logger
}

// NewWorker returns a fan-out worker on st that hands new deliveries to
// dispatch runs lingering in this process through waker.
func NewWorker(st *store.Store, waker *dispatch.Waker, logger *slog.Logger) *Worker {
	return &Worker{store: st, waker: waker, logger: logger}
}

// Work fans the job's events out and completes the job in the same
// transaction, so a crash can never leave the deliveries without the job
// being done, or the job done without the deliveries; then it wakes the
// endpoints' dispatchers (store.WakeDispatchers says why afterwards).
func (w *Worker) Work(ctx context.Context, job *river.Job[jobs.FanoutArgs]) error {
	touched, _, err := w.store.FanOut(ctx, job.Args.EventIDs, func(ctx context.Context, tx pgx.Tx) error {
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
	if err != nil {
		return err
	}
	if err := w.store.WakeDispatchers(ctx, w.waker.Wake(touched), jobs.FromContext(ctx)); err != nil {
		// The job is complete; the sweeper wakes them within a second.
		w.logger.WarnContext(ctx, "fan-out could not wake dispatchers", "err", err, "endpoints", len(touched))
	}
	return nil
}

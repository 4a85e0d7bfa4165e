// Package fanout is the River worker that turns stored events into
// deliveries, one per subscribed endpoint, and wakes those endpoints'
// dispatchers.
package fanout

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/store"
)

// Worker runs jobs.FanoutArgs.
type Worker struct {
	river.WorkerDefaults[jobs.FanoutArgs]
	store *store.Store
}

// NewWorker returns a fan-out worker on st.
func NewWorker(st *store.Store) *Worker { return &Worker{store: st} }

// Work fans the job's events out and completes the job in the same
// transaction, so a crash can never leave the deliveries without the job
// being done, or the job done without the deliveries.
func (w *Worker) Work(ctx context.Context, job *river.Job[jobs.FanoutArgs]) error {
	_, err := w.store.FanOut(ctx, job.Args.EventIDs, jobs.FromContext(ctx), func(ctx context.Context, tx pgx.Tx) error {
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
	return err
}

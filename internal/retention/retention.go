// Package retention is the periodic River worker that deletes delivered
// deliveries (and, by cascade, their attempts) older than SLUICE_RETENTION.
// Dead deliveries are kept for replay.
package retention

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/store"
)

// chunk bounds one DELETE, so retention never holds long locks.
const chunk = 5000

// Worker runs jobs.RetentionArgs.
type Worker struct {
	river.WorkerDefaults[jobs.RetentionArgs]
	store  *store.Store
	maxAge time.Duration
}

// NewWorker returns a retention worker deleting deliveries older than maxAge.
func NewWorker(st *store.Store, maxAge time.Duration) *Worker {
	return &Worker{store: st, maxAge: maxAge}
}

// Timeout is the longest one retention run may take; an interrupted run
// has made progress and the next one goes on from there.
const Timeout = 10 * time.Minute

// Timeout implements river.Worker.
func (w *Worker) Timeout(*river.Job[jobs.RetentionArgs]) time.Duration { return Timeout }

// Work deletes old delivered deliveries in chunks until none is left.
func (w *Worker) Work(ctx context.Context, job *river.Job[jobs.RetentionArgs]) error {
	before := time.Now().Add(-w.maxAge)
	for {
		n, err := w.store.DeleteOldDelivered(ctx, before, chunk)
		if err != nil || n < chunk {
			return err
		}
	}
}

// Package retention is the periodic River worker that deletes delivered
// deliveries (and, by cascade, their attempts) older than SLUICE_RETENTION,
// and dead ones, kept for replay until then, older than
// SLUICE_DEAD_RETENTION.
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

// Config says how long deliveries are kept.
type Config struct {
	// Delivered is how long a delivered delivery is kept.
	Delivered time.Duration
	// Dead is how long a dead delivery is kept for replay.
	Dead time.Duration
}

// Worker runs jobs.RetentionArgs.
type Worker struct {
	river.WorkerDefaults[jobs.RetentionArgs]
	store *store.Store
	cfg   Config
}

// NewWorker returns a retention worker.
func NewWorker(st *store.Store, cfg Config) *Worker {
	return &Worker{store: st, cfg: cfg}
}

// Timeout is the longest one retention run may take; an interrupted run
// has made progress and the next one goes on from there.
const Timeout = 10 * time.Minute

// Timeout implements river.Worker.
func (w *Worker) Timeout(*river.Job[jobs.RetentionArgs]) time.Duration { return Timeout }

// Work deletes old delivered, then old dead, deliveries in chunks until
// none is left.
func (w *Worker) Work(ctx context.Context, job *river.Job[jobs.RetentionArgs]) error {
	now := time.Now()
	if err := deleteAll(ctx, w.store.DeleteOldDelivered, now.Add(-w.cfg.Delivered)); err != nil {
		return err
	}
	return deleteAll(ctx, w.store.DeleteOldDead, now.Add(-w.cfg.Dead))
}

// deleteAll calls del a chunk at a time until a chunk comes back short.
func deleteAll(ctx context.Context, del func(context.Context, time.Time, int) (int64, error), before time.Time) error {
	for {
		n, err := del(ctx, before, chunk)
		if err != nil || n < chunk {
			return err
		}
	}
}

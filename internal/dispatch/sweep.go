package dispatch

import (
	"context"

	"github.com/riverqueue/river"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/store"
)

// SweepWorker runs jobs.SweepArgs: it queues a dispatch for every enabled
// endpoint with deliveries due. Dispatch jobs end when nothing is due, so
// this is what brings back retries once their backoff has passed, and
// endpoints once they are enabled again. Endpoints already being dispatched
// are skipped by the dispatch job's uniqueness.
type SweepWorker struct {
	river.WorkerDefaults[jobs.SweepArgs]
	store *store.Store
	waker *Waker
}

// NewSweepWorker returns a sweep worker; runs lingering in this process are
// woken through waker rather than sent a job.
func NewSweepWorker(st *store.Store, waker *Waker) *SweepWorker {
	return &SweepWorker{store: st, waker: waker}
}

// Work implements river.Worker.
func (w *SweepWorker) Work(ctx context.Context, job *river.Job[jobs.SweepArgs]) error {
	ids, err := w.store.EndpointsWithDueDeliveries(ctx)
	if err != nil {
		return err
	}
	return jobs.FromContext(ctx).DispatchNow(ctx, w.waker.Wake(ids))
}

package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
)

// A Waker connects fan-out to the dispatch runs in the same process. Each
// run registers while it works; fan-out signals the registered runs of the
// endpoints it gave deliveries to instead of queueing a dispatch job for
// them, and a run with nothing due lingers a moment for such a signal
// before it ends. Under steady load an endpoint so keeps one running job,
// and fan-out inserts no job at all.
//
// It cannot strand a delivery: fan-out wakes only after its deliveries have
// committed, and a run leaves the Waker before its final check
// (Worker.finish). So if Wake finds the run registered, the run's final
// check comes later and sees the deliveries; if not, Wake reports the
// endpoint and fan-out queues a dispatch job the usual way. A run that ends
// without a final check (parked behind a throttle or an open circuit, or
// requeued at the end of its budget) is followed by another run of the same
// job, which sees them.
type Waker struct {
	maxLinger int // most runs lingering at once, so lingering never starves the queue

	mu        sync.Mutex
	runs      map[uuid.UUID]chan struct{}
	lingering int
}

// lingerFor is how long a run with nothing due waits for more.
const lingerFor = time.Second

// NewWaker returns a Waker allowing at most maxLinger lingering runs.
func NewWaker(maxLinger int) *Waker {
	return &Waker{maxLinger: maxLinger, runs: map[uuid.UUID]chan struct{}{}}
}

// Wake signals the registered runs of these endpoints and returns the
// endpoints that have none here, which need a dispatch job.
func (w *Waker) Wake(endpointIDs []uuid.UUID) []uuid.UUID {
	if w == nil {
		return endpointIDs
	}
	var rest []uuid.UUID
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range endpointIDs {
		ch, ok := w.runs[id]
		if !ok {
			rest = append(rest, id)
			continue
		}
		select {
		case ch <- struct{}{}:
		default: // already signalled
		}
	}
	return rest
}

// join registers a run of the endpoint and returns its wake-up channel, or
// nil when the Waker is off or another run of the endpoint is registered.
func (w *Waker) join(endpointID uuid.UUID) chan struct{} {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, taken := w.runs[endpointID]; taken {
		return nil
	}
	ch := make(chan struct{}, 1)
	w.runs[endpointID] = ch
	return ch
}

// leave unregisters the run that joined with ch; it may be called again.
func (w *Waker) leave(endpointID uuid.UUID, ch chan struct{}) {
	if w == nil || ch == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.runs[endpointID] == ch {
		delete(w.runs, endpointID)
	}
}

// linger waits on clock up to lingerFor (within deadline) for a signal on
// ch, and reports whether one came.
func (w *Waker) linger(ctx context.Context, clock Clock, ch chan struct{}, deadline time.Time) bool {
	wait := min(lingerFor, deadline.Sub(clock.Now()))
	if ch == nil || wait <= 0 {
		return false
	}
	select {
	case <-ch: // signalled while the run was busy
		return true
	default:
	}
	w.mu.Lock()
	if w.lingering >= w.maxLinger {
		w.mu.Unlock()
		return false
	}
	w.lingering++
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.lingering--
		w.mu.Unlock()
	}()

	elapsed, stop := clock.After(wait)
	defer stop()
	select {
	case <-ch:
		return true
	case <-elapsed:
		return false
	case <-ctx.Done():
		return false
	}
}

package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Lingering: a dispatch run whose endpoint has nothing due waits a moment
// before it ends, and fan-out in the same process hands it new deliveries
// directly (Waker.Wake) instead of queueing a new job. Under steady load an
// endpoint then keeps one running job instead of one job per delivery.
//
// It cannot strand a delivery: fan-out wakes only after its deliveries have
// committed, and a run's final check (FinishDispatch) happens only after it
// has left the Waker. So if Wake finds the run waiting, the run's final
// check comes later and sees the deliveries; if not, Wake reports the
// endpoint and fan-out queues a dispatch job the usual way.

// lingerFor is how long a run with nothing due waits for more.
const lingerFor = time.Second

// Waker connects fan-out to lingering dispatch runs in one process.
type Waker struct {
	max     int // most runs lingering at once, so lingering never starves the queue
	mu      sync.Mutex
	waiting map[uuid.UUID]chan struct{}
}

// NewWaker returns a Waker allowing at most max lingering runs.
func NewWaker(max int) *Waker {
	return &Waker{max: max, waiting: map[uuid.UUID]chan struct{}{}}
}

// Wake signals the lingering runs of these endpoints and returns the
// endpoints that have none, which need a dispatch job.
func (w *Waker) Wake(endpointIDs []uuid.UUID) []uuid.UUID {
	if w == nil {
		return endpointIDs
	}
	rest := endpointIDs[:0:0]
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range endpointIDs {
		ch, ok := w.waiting[id]
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

// linger waits up to lingerFor (within deadline) for fan-out to wake the
// endpoint's run, and reports whether it was woken.
func (w *Waker) linger(ctx context.Context, endpointID uuid.UUID, deadline time.Time) bool {
	wait := min(lingerFor, time.Until(deadline))
	if w == nil || wait <= 0 {
		return false
	}
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if _, taken := w.waiting[endpointID]; taken || len(w.waiting) >= w.max {
		w.mu.Unlock()
		return false
	}
	w.waiting[endpointID] = ch
	w.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	woken := false
	select {
	case <-ch:
		woken = true
	case <-timer.C:
	case <-ctx.Done():
	}
	w.mu.Lock()
	delete(w.waiting, endpointID)
	w.mu.Unlock()
	select {
	case <-ch: // woken just as the wait ended
		woken = true
	default:
	}
	return woken
}

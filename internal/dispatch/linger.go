package dispatch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/store"
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
//
// Ingest can hand a run the deliveries themselves (Hand), as a claim would
// return them, and the run then sends them without claiming: a round trip
// to the database less per wake-up. A handed delivery is still queued in
// the database until its attempt is recorded, so a hand-off the run cannot
// use costs it nothing but the claim it would have made anyway. What a
// hand-off must never do is send a delivery a claim already took: see
// Seq.
type Waker struct {
	maxLinger int // most runs lingering at once, so lingering never starves the queue

	// seq counts the claims completed by runs registered here. A hand-off
	// carries seq as it was read before its deliveries were inserted, and
	// a run takes only hand-offs read no earlier than its last claim
	// completed: a claim that could have seen the deliveries (its snapshot
	// taken after their commit) completed after that read.
	seq atomic.Uint64

	mu        sync.Mutex
	runs      map[uuid.UUID]*registration
	lingering int
}

// registration is a run's place in the Waker.
type registration struct {
	ch chan struct{} // holds a signal not yet taken

	// Under Waker.mu:
	claimed     uint64          // Waker.seq when the run's last claim completed
	handed      []store.Claimed // deliveries handed since, all usable
	handedBytes int             // store.ClaimedBytes(handed)
	unknown     bool            // signalled without deliveries, or with some unusable: the run must claim
}

// maxHandedBytes bounds the deliveries held for one run (payloads
// included): a run busy with a slow receiver while posts pour in claims
// them later instead of holding them all in memory.
const maxHandedBytes = 1 << 20

// lingerFor is how long a run with nothing due waits for more.
const lingerFor = time.Second

// NewWaker returns a Waker allowing at most maxLinger lingering runs.
func NewWaker(maxLinger int) *Waker {
	return &Waker{maxLinger: maxLinger, runs: map[uuid.UUID]*registration{}}
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
		if !w.signal(id, 0, nil) {
			rest = append(rest, id)
		}
	}
	return rest
}

// Seq is the count of claims completed here, to read before inserting
// deliveries that will be handed over (Hand).
func (w *Waker) Seq() uint64 {
	if w == nil {
		return 0
	}
	return w.seq.Load()
}

// Hand signals the registered runs of the touched endpoints, handing them
// the deliveries inserted after seq was read (Seq), and returns the
// endpoints that have no run here, which need a dispatch job.
func (w *Waker) Hand(seq uint64, touched store.Touched) []uuid.UUID {
	if w == nil {
		return touched.Endpoints()
	}
	var rest []uuid.UUID
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, made := range touched {
		if !w.signal(id, seq, made) {
			rest = append(rest, id)
		}
	}
	return rest
}

// signal signals the endpoint's registered run with the deliveries made
// (nil: not known) after seq, and reports whether there was one. Under mu.
func (w *Waker) signal(endpointID uuid.UUID, seq uint64, made []store.Claimed) bool {
	r, ok := w.runs[endpointID]
	if !ok {
		return false
	}
	switch size := store.ClaimedBytes(made); {
	case made == nil || seq < r.claimed || r.handedBytes+size > maxHandedBytes:
		r.unknown = true
		r.handed, r.handedBytes = nil, 0
	case !r.unknown:
		r.handed = append(r.handed, made...)
		r.handedBytes += size
	}
	select {
	case r.ch <- struct{}{}:
	default: // already signalled
	}
	return true
}

// join registers a run of the endpoint, or returns nil when the Waker is
// off or another run of the endpoint is registered.
func (w *Waker) join(endpointID uuid.UUID) *registration {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, taken := w.runs[endpointID]; taken {
		return nil
	}
	r := &registration{ch: make(chan struct{}, 1), claimed: w.seq.Load(), unknown: true}
	w.runs[endpointID] = r
	return r
}

// leave unregisters the run registered as r; it may be called again.
func (w *Waker) leave(endpointID uuid.UUID, r *registration) {
	if w == nil || r == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.runs[endpointID] == r {
		delete(w.runs, endpointID)
	}
}

// claiming notes that r's run is about to claim: the claim will see every
// delivery signalled so far, so those signals are spent.
func (w *Waker) claiming(r *registration) {
	if r == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	r.handed, r.handedBytes = nil, 0
	r.unknown = false
}

// claimed notes that r's run has completed a claim, and from now on takes
// only hand-offs read after it (see Waker.seq). Deliveries handed while it
// ran may or may not be among those it claimed, and signals without
// deliveries may have come after it looked: either way the run must claim
// again.
func (w *Waker) claimed(r *registration) {
	if r == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	r.claimed = w.seq.Add(1)
	if len(r.handed) > 0 {
		r.handed, r.handedBytes = nil, 0
		r.unknown = true
	}
}

// take returns the deliveries handed to r's run since its last claim, if
// they are all that was signalled; otherwise (nothing handed, or a signal
// without deliveries) nil, and the run must claim.
func (w *Waker) take(r *registration) []store.Claimed {
	if r == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	handed := r.handed
	r.handed, r.handedBytes = nil, 0
	if r.unknown {
		return nil
	}
	return handed
}

// linger waits on clock up to lingerFor (within deadline) for a signal to
// r's run, and reports whether one came.
func (w *Waker) linger(ctx context.Context, clock Clock, r *registration, deadline time.Time) bool {
	wait := min(lingerFor, deadline.Sub(clock.Now()))
	if r == nil || wait <= 0 {
		return false
	}
	ch := r.ch
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

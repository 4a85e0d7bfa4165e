package dispatch

import (
	"container/heap"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
)

// An alarm announces parked jobs to River's dispatch fetchers as their
// parks end. A parked job is available but due in the future, and River's
// fetch finds such a job only when it hears of an insert to the queue or
// when it polls, which it does rarely so that an idle process stays quiet
// (internal/app/river.go). So at the end of each park in this process the
// alarm asks for the endpoint's dispatch job
// (jobs.Queue.DispatchNow): the parked job is live, so River's unique
// insert adds nothing, but River announces the insert to the dispatch
// queue's fetchers, in every process, and they find the parked job due.
// Endpoints whose waits end together are asked for in one insert, and the
// alarm rings at most every alarmEvery, so that thousands of parked
// endpoints (throttled, circuit open) coming due cost at most that many
// inserts a second, as a poll of that period would.
//
// The alarm only hastens: a park it missed (another process parked the
// endpoint, or this one restarted) is found by the next poll.
type alarm struct {
	clock  Clock
	logger *slog.Logger

	mu      sync.Mutex
	ask     func(context.Context, []uuid.UUID) error // nil until the first park
	waits   waitHeap
	changed chan struct{}
	rang    time.Time // the last ring
	failing bool      // the last ring's ask failed; run's alone
}

// newAlarm returns an alarm on clock; it rings while run runs (the
// Nudger's service).
func newAlarm(clock Clock, logger *slog.Logger) *alarm {
	return &alarm{clock: clock, logger: logger, changed: make(chan struct{}, 1)}
}

// alarmLate is how long after a wait's end the alarm rings, so that
// Postgres's clock has passed the job's due time too.
const alarmLate = 5 * time.Millisecond

// alarmEvery is the shortest time between two rings.
const alarmEvery = 50 * time.Millisecond

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// set rings for the endpoint just after when, asking through ask.
func (a *alarm) set(endpointID uuid.UUID, when time.Time, ask func(context.Context, []uuid.UUID) error) {
	a.mu.Lock()
	a.ask = ask
	heap.Push(&a.waits, wait{endpointID: endpointID, at: when.Add(alarmLate)})
	a.mu.Unlock()
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

// run rings until ctx ends.
func (a *alarm) run(ctx context.Context) {
	for {
		a.ring(ctx)
		a.mu.Lock()
		var next <-chan time.Time
		stop := func() {}
		if len(a.waits) > 0 {
			at := maxTime(a.waits[0].at, a.rang.Add(alarmEvery))
			next, stop = a.clock.After(at.Sub(a.clock.Now()))
		}
		a.mu.Unlock()
		select {
		case <-next:
		case <-a.changed:
		case <-ctx.Done():
			stop()
			return
		}
		stop()
	}
}

// alarmTimeout bounds one ring's insert.
const alarmTimeout = 10 * time.Second

// ring asks for the endpoints whose waits have ended.
func (a *alarm) ring(ctx context.Context) {
	now := a.clock.Now()
	a.mu.Lock()
	var due []uuid.UUID
	for len(a.waits) > 0 && !a.waits[0].at.After(now) {
		due = append(due, heap.Pop(&a.waits).(wait).endpointID)
	}
	ask := a.ask
	if len(due) > 0 {
		a.rang = now
	}
	a.mu.Unlock()
	if len(due) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, alarmTimeout)
	defer cancel()
	err := ask(ctx, due)
	if err != nil && !a.failing { // once per outage, not at every ring
		a.logger.Warn("dispatch alarm could not announce parked jobs coming due; the next poll finds them", "endpoints", len(due), "err", err)
	}
	a.failing = err != nil
}

// wait is an endpoint's park, ending at at.
type wait struct {
	endpointID uuid.UUID
	at         time.Time
}

// waitHeap orders waits by their end, earliest first (container/heap).
type waitHeap []wait

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h waitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *waitHeap) Push(x any)        { *h = append(*h, x.(wait)) }
func (h *waitHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	*h = old[:len(old)-1]
	return w
}

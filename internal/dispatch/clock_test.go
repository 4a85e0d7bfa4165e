package dispatch

import (
	"context"
	"sync"
	"testing"
	"time"
)

// fakeClock is a Clock that moves only when a test calls Advance. Every
// wait it is asked for is sent on waits as it starts, so a test knows that
// the code under test is waiting, and for how long, before it moves time.
type fakeClock struct {
	waits chan time.Duration

	mu     sync.Mutex
	now    time.Time
	timers map[*fakeTimer]struct{}
}

type fakeTimer struct {
	at time.Time
	c  chan time.Time
}

func newFakeClock(now time.Time) *fakeClock {
	return &fakeClock{waits: make(chan time.Duration, 64), now: now, timers: map[*fakeTimer]struct{}{}}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) After(d time.Duration) (<-chan time.Time, func()) {
	t := &fakeTimer{c: make(chan time.Time, 1)}
	f.mu.Lock()
	t.at = f.now.Add(d)
	f.timers[t] = struct{}{}
	f.fire()
	f.mu.Unlock()
	f.waits <- d
	return t.c, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.timers, t)
	}
}

// Advance moves the clock on by d, firing the timers due by then.
func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	f.fire()
}

// pending is how many timers have neither fired nor been stopped.
func (f *fakeClock) pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// fire sends the time on each timer due at f.now; f.mu is held.
func (f *fakeClock) fire() {
	for t := range f.timers {
		if !t.at.After(f.now) {
			t.c <- f.now
			delete(f.timers, t)
		}
	}
}

// answersAtOnce runs decide and returns its answer, failing the test if
// decide starts waiting on clk instead (decide's ctx then ends it).
func answersAtOnce(t *testing.T, clk *fakeClock, decide func(ctx context.Context) bool) bool {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	answer := make(chan bool, 1)
	go func() { answer <- decide(ctx) }()
	select {
	case ok := <-answer:
		return ok
	case d := <-clk.waits:
		t.Fatalf("waited %s instead of answering at once", d)
		return false
	}
}

// waiting starts decide, which must wait on clk for want, and returns the
// channel its answer comes on once that wait is under way.
func waiting(t *testing.T, clk *fakeClock, want time.Duration, decide func() bool) <-chan bool {
	t.Helper()
	answer := make(chan bool, 1)
	go func() { answer <- decide() }()
	select {
	case d := <-clk.waits:
		if d != want {
			t.Fatalf("waits %s, want %s", d, want)
		}
	case ok := <-answer:
		t.Fatalf("answered %v at once instead of waiting %s", ok, want)
	}
	return answer
}

// Package fakeclock is a clock that moves only when a test moves it, for
// the services that take a jobs.Clock.
package fakeclock

import (
	"sync"
	"time"
)

// Clock moves only when Advance is called. Every wait it is asked for is
// sent on Waits as it starts, so a test knows that the code under test is
// waiting, and for how long, before it moves time.
type Clock struct {
	// Waits receives the duration of every After, as it is asked for. It
	// holds 64; the waits of a test that does not read them are dropped
	// past that, so that the code waiting never blocks on it.
	Waits chan time.Duration

	mu     sync.Mutex
	now    time.Time
	timers map[*timer]struct{}
}

type timer struct {
	at time.Time
	c  chan time.Time
}

// New returns a Clock stopped at now.
func New(now time.Time) *Clock {
	return &Clock{Waits: make(chan time.Duration, 64), now: now, timers: map[*timer]struct{}{}}
}

// Now is the clock's time.
func (f *Clock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After returns a channel that receives once the clock has been advanced
// by d, and a function that stops the wait.
func (f *Clock) After(d time.Duration) (<-chan time.Time, func()) {
	t := &timer{c: make(chan time.Time, 1)}
	f.mu.Lock()
	t.at = f.now.Add(d)
	f.timers[t] = struct{}{}
	f.fire()
	f.mu.Unlock()
	select {
	case f.Waits <- d:
	default:
	}
	return t.c, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.timers, t)
	}
}

// Advance moves the clock on by d, firing the waits due by then.
func (f *Clock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	f.fire()
}

// Pending is how many waits have neither fired nor been stopped.
func (f *Clock) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// fire sends the time on each wait due at f.now; f.mu is held.
func (f *Clock) fire() {
	for t := range f.timers {
		if !t.at.After(f.now) {
			t.c <- f.now
			delete(f.timers, t)
		}
	}
}

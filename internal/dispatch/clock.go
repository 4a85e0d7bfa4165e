package dispatch

import "time"

// Clock is the time a dispatch run reads and waits on: when it claims and
// records, when its budget ends, when a failed delivery is retried, and how
// long it sleeps through a short wait or lingers for more. Config.Clock
// injects one, so tests can move time by hand instead of sleeping; the
// default is the system's. The store's queries read Postgres's now(), not
// this clock.
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// After returns a channel that receives once d has passed, and a
	// function that stops the wait and frees it; call stop when done.
	After(d time.Duration) (c <-chan time.Time, stop func())
}

// realClock is the system's time: Config.Clock's default.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) After(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

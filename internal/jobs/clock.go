package jobs

import "time"

// Clock is the time the dispatch runs and the services around River's
// jobs (the lease holder here, the Nudger, the sweeper and retention) read
// and wait on, injected through their Config so that tests move time by
// hand instead of sleeping. Statements read Postgres's now(), not this
// clock.
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// After returns a channel that receives once d has passed, and a
	// function that stops the wait and frees it; call stop when done.
	After(d time.Duration) (c <-chan time.Time, stop func())
}

// SystemClock is the system's time: the default Clock.
var SystemClock Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) After(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

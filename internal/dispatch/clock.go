package dispatch

import "github.com/sluice-dev/sluice/internal/jobs"

// Clock is the time a dispatch run reads and waits on: when it claims and
// records, when its budget ends, when a failed delivery is retried, and how
// long it sleeps through a short wait or lingers for more. Config.Clock
// injects one, so tests can move time by hand instead of sleeping; the
// default is jobs.SystemClock. It is jobs.Clock, so one clock serves the
// runs and the services around them.
type Clock = jobs.Clock

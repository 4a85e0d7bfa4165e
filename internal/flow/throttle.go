// The throttle decides how long an endpoint that answered 429 Too Many
// Requests is left alone: as long as its Retry-After says (seconds or
// HTTP-date, capped), or else the next step of SLUICE_THROTTLE_SCHEDULE,
// counting consecutive 429s. The store keeps the result in the
// destination_throttle table and drops it on the next success.

package flow

import (
	"fmt"
	"time"
)

// MaxRetryAfter caps how long a receiver's Retry-After can silence it.
const MaxRetryAfter = 24 * time.Hour

// Throttle is an endpoint's throttle window.
type Throttle struct {
	Until  time.Time
	Reason string
	Count  int // consecutive 429s
}

// Active reports whether the window is still open at now.
func (s Throttle) Active(now time.Time) bool { return now.Before(s.Until) }

// NextThrottle is the window after one more 429, answered with retryAfter (0 if the
// receiver gave none).
func NextThrottle(prev Throttle, retryAfter time.Duration, schedule []time.Duration, now time.Time) Throttle {
	s := Throttle{Count: prev.Count + 1}
	if retryAfter > 0 {
		wait := min(retryAfter, MaxRetryAfter)
		s.Until = now.Add(wait)
		s.Reason = fmt.Sprintf("429 Too Many Requests with Retry-After: waiting %s", wait.Round(time.Millisecond))
		return s
	}
	wait := schedule[min(s.Count, len(schedule))-1]
	s.Until = now.Add(wait)
	s.Reason = fmt.Sprintf("429 Too Many Requests (%d in a row): backing off %s", s.Count, wait)
	return s
}

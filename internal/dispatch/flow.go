package dispatch

import (
	"time"

	"github.com/sluice-dev/sluice/internal/circuit"
	"github.com/sluice-dev/sluice/internal/ratelimit"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/throttle"
)

// planner is the store.Planner of one claim: it lets through as many
// deliveries as the throttle, the circuit, the token bucket and
// max_in_flight allow, and notes why it let none.
type planner struct {
	now          time.Time
	probe        bool
	blockedUntil time.Time     // throttle or open circuit
	tokenWait    time.Duration // rate limit
}

// Plan implements store.Planner.
func (p *planner) Plan(t *store.Target) int {
	if t.Disabled {
		return 0
	}
	f := &t.Flow
	if f.Throttle.Active(p.now) {
		p.blockedUntil = f.Throttle.Until
		return 0
	}
	var allow int
	f.Breaker, allow = f.Breaker.Allow(p.now)
	if allow == 0 {
		p.blockedUntil = *f.Breaker.NextProbeAt
		return 0
	}
	n := t.MaxInFlight
	switch {
	case allow == 1:
		n, p.probe = 1, true
	case f.Throttle.Count > 0:
		n = 1 // the throttle has lifted: one request first, to see it stays lifted
	}
	if rl := t.RateLimit; rl != nil {
		f.Bucket = f.Bucket.Refill(*rl, p.now)
		n = min(n, f.Bucket.Available())
		if n == 0 {
			p.tokenWait = f.Bucket.Wait(*rl)
		}
	}
	return n
}

// wait is how long the claim said to wait before sending again.
func (p *planner) wait() time.Duration {
	if !p.blockedUntil.IsZero() {
		return time.Until(p.blockedUntil)
	}
	return p.tokenWait
}

// Claimed implements store.Planner.
func (p *planner) Claimed(t *store.Target, n int) {
	if t.RateLimit != nil {
		t.Flow.Bucket = t.Flow.Bucket.Take(n)
	}
	if p.probe && n == 0 {
		t.Flow.Breaker.State = sluice.CircuitOpen // nothing to probe with: stay open, probe when there is
	}
}

// applyFlow returns the store.Record callback that folds a batch's results
// into the endpoint's throttle and circuit, and names the transitions to
// email about. For a rate-limited endpoint (rl not nil) it also restates
// the token bucket as of when the batch's last request started
// (ratelimit.Bucket.SentAt).
func (w *Worker) applyFlow(sent []sentDelivery, rl *sluice.RateLimit) func(*store.Flow) []store.Alert {
	return func(f *store.Flow) []store.Alert {
		var alerts []store.Alert
		now := time.Now()
		if rl != nil {
			f.Bucket = f.Bucket.SentAt(*rl, len(sent), lastStart(sent))
		}
		throttledNow := false
		for _, s := range sent {
			var tr circuit.Transition
			switch res := s.result; {
			case res.Throttled():
				f.Throttle = throttle.Next(f.Throttle, res.RetryAfter, w.cfg.ThrottleSchedule, now)
				throttledNow = true
				continue
			case res.Delivered():
				if !throttledNow {
					f.Throttle = throttle.State{}
				}
				f.Breaker, tr = f.Breaker.Record(true, "", now, w.cfg.Circuit)
			default:
				f.Breaker, tr = f.Breaker.Record(false, res.Err, now, w.cfg.Circuit)
			}
			switch tr {
			case circuit.Opened:
				alerts = append(alerts, store.Alert{Opened: true, LastError: f.Breaker.LastError,
					Failures: f.Breaker.Failures, NextProbeAt: f.Breaker.NextProbeAt})
			case circuit.Closed:
				alerts = append(alerts, store.Alert{Opened: false})
				// The backlog drains at the rate limit from an empty bucket,
				// never as a burst.
				f.Bucket = ratelimit.Bucket{Tokens: 0, At: now}
			}
		}
		return alerts
	}
}

// lastStart is when the last of a batch's requests started.
func lastStart(sent []sentDelivery) time.Time {
	var last time.Time
	for _, s := range sent {
		if s.result.At.After(last) {
			last = s.result.At
		}
	}
	return last
}

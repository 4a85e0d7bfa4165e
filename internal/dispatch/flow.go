package dispatch

import (
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/internal/flow"
	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// claimPlan is what one claim may take from an endpoint, decided from its
// target as read under the row lock: as many deliveries as the throttle,
// the circuit, the token bucket and max_in_flight allow, and why none when
// none.
type claimPlan struct {
	n            int           // deliveries that may be claimed now
	flow         Flow          // the flow state the claim leaves (half-open, refilled bucket)
	probe        bool          // n is a half-open circuit's one probe
	blockedUntil time.Time     // throttle or open circuit
	tokenWait    time.Duration // rate limit
}

// planClaim decides how many of t's due deliveries may be claimed at now.
func planClaim(t Target, now time.Time) claimPlan {
	p := claimPlan{flow: t.Flow}
	if t.Disabled {
		return p
	}
	f := &p.flow
	if f.Throttle.Active(now) {
		p.blockedUntil = f.Throttle.Until
		return p
	}
	var allow int
	f.Breaker, allow = f.Breaker.Allow(now)
	if allow == 0 {
		p.blockedUntil = *f.Breaker.NextProbeAt
		return p
	}
	p.n = t.MaxInFlight
	switch {
	case allow == 1:
		p.n, p.probe = 1, true
	case f.Throttle.Count > 0:
		p.n = 1 // the throttle has lifted: one request first, to see it stays lifted
	}
	if rl := t.RateLimit; rl != nil {
		pace := deliveryPace(*rl, *f, now)
		if rl.Adaptive {
			f.Bucket = flow.StartEmpty(f.Bucket, now)
		}
		f.Bucket = f.Bucket.Refill(pace, now)
		p.n = min(p.n, f.Bucket.Available())
		if p.n == 0 {
			p.tokenWait = f.Bucket.Wait(pace)
		}
	}
	return p
}

// claimed is the flow state after claiming n of the plan's deliveries: the
// tokens paid, and an unused probe given back (the circuit stays open and
// probes when there is something to probe with).
func (p claimPlan) claimed(rl *sluice.RateLimit, n int) Flow {
	f := p.flow
	if rl != nil {
		f.Bucket = f.Bucket.Take(n)
	}
	if p.probe && n == 0 {
		f.Breaker.State = sluice.CircuitOpen
	}
	return f
}

// blocked reports whether the plan let nothing through because of a
// throttle, an open circuit or an empty bucket.
func (p claimPlan) blocked() bool { return !p.blockedUntil.IsZero() || p.tokenWait > 0 }

// wait is how long, from now, the plan said to wait before sending again.
func (p claimPlan) wait(now time.Time) time.Duration {
	if !p.blockedUntil.IsZero() {
		return p.blockedUntil.Sub(now)
	}
	return p.tokenWait
}

// flowPolicy is what decides how a batch's results change an endpoint's
// flow state.
type flowPolicy struct {
	throttle     []time.Duration // waits after consecutive 429s without Retry-After
	circuit      flow.CircuitConfig
	disableAfter time.Duration // how long an open circuit's attempts may all fail before the endpoint is disabled; 0: never
}

// deliveryPace is the pace of deliveries to an endpoint under rl with
// flow state f at now: rl's, or for an adaptive limit its effective rate's.
func deliveryPace(rl sluice.RateLimit, f Flow, now time.Time) flow.Pace {
	if !rl.Adaptive {
		return flow.DeliveryPace(rl)
	}
	return flow.AdaptivePace(rl, f.Adaptive.Current(flow.LimitOf(rl), now))
}

// slowsDown reports whether res asks an adaptive endpoint to slow down: a
// 429, a 503 or a timeout.
func slowsDown(res send.Result) bool {
	return res.Throttled() || res.StatusCode == http.StatusServiceUnavailable || res.TimedOut()
}

// apply folds a batch's results into flow state f at now: 429s throttle
// the endpoint (on an adaptive one, only those with Retry-After), 429s,
// 503s and timeouts halve an adaptive endpoint's rate (flow.Adaptive),
// failures count towards opening its circuit, a success closes it
// (emptying a rate-limited endpoint's bucket, so the backlog drains at
// the rate, never as a burst) and lifts the throttle. For a
// rate-limited endpoint (rl not nil) it also restates the token bucket as
// of when the batch's last request started (flow.Bucket.SentAt). It
// returns the new state and the circuit transitions to email about; it has
// no other effect, so calling it to see whether a batch changes anything
// counts nothing.
func (pol flowPolicy) apply(f Flow, rl *sluice.RateLimit, sent []sentDelivery, now time.Time) (Flow, []CircuitChange) {
	var changes []CircuitChange
	adaptive := rl != nil && rl.Adaptive
	if rl != nil {
		f.Bucket = f.Bucket.SentAt(deliveryPace(*rl, f, now), len(sent), lastStart(sent))
	}
	throttledNow := false
	for _, s := range sent {
		var tr flow.Transition
		res := s.result
		if adaptive && slowsDown(res) {
			f.Adaptive = f.Adaptive.Slowdown(flow.LimitOf(*rl), res.At, now)
		}
		switch {
		case res.Throttled() && adaptive && res.RetryAfter == 0:
			continue // the lowered rate is the answer: no throttle window
		case res.Throttled():
			// An attempt started before the end of a window it finds open
			// was in flight when that window opened (nothing is sent
			// during one): the same 429, not one more in a row.
			if !f.Throttle.Active(res.At) {
				f.Throttle = flow.NextThrottle(f.Throttle, res.RetryAfter, pol.throttle, now)
			}
			throttledNow = true
			continue
		case res.Delivered():
			if !throttledNow {
				f.Throttle = flow.Throttle{}
			}
			f.Breaker, tr = f.Breaker.Record(true, "", now, pol.circuit)
		default:
			f.Breaker, tr = f.Breaker.Record(false, res.Err, now, pol.circuit)
		}
		switch tr {
		case flow.CircuitOpened:
			changes = append(changes, CircuitChange{Opened: true, LastError: f.Breaker.LastError,
				Failures: f.Breaker.Failures, NextProbeAt: f.Breaker.NextProbeAt})
		case flow.CircuitClosed:
			changes = append(changes, CircuitChange{Opened: false})
			// The backlog drains at the rate limit from an empty bucket,
			// never as a burst.
			f.Bucket = flow.Bucket{Tokens: 0, At: now}
		}
	}
	return f, changes
}

// changes reports whether a batch would change flow state f or make a
// transition: if not, its attempts are recorded without the endpoint's
// lock (the unlocked path).
func (pol flowPolicy) changes(f Flow, rl *sluice.RateLimit, sent []sentDelivery, now time.Time) bool {
	after, changes := pol.apply(f, rl, sent, now)
	return len(changes) > 0 || after != f
}

// disable decides whether a batch that left flow state after at now
// disables its endpoint, and why: at once when a receiver answered 410
// Gone; when every attempt has failed for disableAfter since the circuit
// opened (only probes go while it is open, so none succeeded meanwhile).
// It returns "" to keep the endpoint, else the reason and the error to
// tell its owner.
func (pol flowPolicy) disable(after Flow, sent []sentDelivery, now time.Time) (reason, lastError string) {
	failed := false
	for _, s := range sent {
		if s.result.StatusCode == http.StatusGone {
			return sluice.DisabledGone, s.result.Err
		}
		failed = failed || !s.result.Delivered() && !s.result.Throttled()
	}
	b := after.Breaker
	open := b.State == sluice.CircuitOpen || b.State == sluice.CircuitHalfOpen
	if pol.disableAfter > 0 && failed && open && b.OpenedAt != nil && now.Sub(*b.OpenedAt) >= pol.disableAfter {
		return sluice.DisabledFailing, b.LastError
	}
	return "", ""
}

// needsOpEvent reports whether a batch has something an operational event
// reports beyond its flow state: a 410, or a delivery going dead. Such a
// batch is recorded under the endpoint's lock.
func needsOpEvent(sent []sentDelivery) bool {
	for _, s := range sent {
		if s.result.StatusCode == http.StatusGone || s.outcome.Status == sluice.DeliveryDead {
			return true
		}
	}
	return false
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

// waitUntil is when an endpoint with flow state f and rate limit rl may
// send again: when its throttle or open circuit lifts, or else when its
// token bucket next holds a token; zero when it may send at now.
func waitUntil(f Flow, rl *sluice.RateLimit, now time.Time) time.Time {
	if until := blockedUntil(f, now); !until.IsZero() || rl == nil {
		return until
	}
	pace := deliveryPace(*rl, f, now)
	if b := f.Bucket.Refill(pace, now); b.Available() == 0 {
		return now.Add(b.Wait(pace))
	}
	return time.Time{}
}

// blockedUntil is when an endpoint's throttle or open circuit lifts (zero
// if neither holds it at now).
func blockedUntil(f Flow, now time.Time) time.Time {
	if f.Throttle.Active(now) {
		return f.Throttle.Until
	}
	if _, allow := f.Breaker.Allow(now); allow == 0 {
		return *f.Breaker.NextProbeAt
	}
	return time.Time{}
}

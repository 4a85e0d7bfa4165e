// Smart delivery adapts an endpoint's rate to what its receiver takes
// (AIMD): the effective rate starts at the configured one, is halved
// (never below a minimum) on a slowdown signal, a 429, a 503 or a
// timeout, and grows back by a tenth of the configured rate for each
// second without one, up to the configured rate. It is pure arithmetic
// over an Adaptive value; the store keeps it on the endpoint row with the
// token bucket, so every worker process paces at the same rate.

package flow

import (
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// DefaultAdaptiveMin is the floor of an adaptive rate whose min is not set,
// in deliveries a second (or the configured rate, if that is lower).
const DefaultAdaptiveMin = 1.0

// AdaptiveLimit is what an adaptive rate moves between: Configured, the
// rate limit's own rate, and Min, both in deliveries a second.
type AdaptiveLimit struct {
	Configured float64
	Min        float64
}

// LimitOf is the adaptive limit of rl, with Min defaulted.
func LimitOf(rl sluice.RateLimit) AdaptiveLimit {
	l := AdaptiveLimit{Configured: rl.TokensPerSecond(), Min: rl.MinPerSecond()}
	if l.Min <= 0 {
		l.Min = DefaultAdaptiveMin
	}
	l.Min = min(l.Min, l.Configured)
	return l
}

// Adaptive is an adaptive rate's state: Rate, in deliveries a second, as of
// At, the last slowdown, from which it grows; HalvedAt is the last
// halving. The zero value is an endpoint that never slowed down: it runs
// at the configured rate.
type Adaptive struct {
	Rate     float64
	At       time.Time
	HalvedAt time.Time
}

// AdaptiveOf is the state an endpoint row keeps (its adaptive_rate,
// adaptive_rate_at and adaptive_halved_at columns, nil when unset): the
// zero value when it has not slowed down.
func AdaptiveOf(rate *float64, at, halvedAt *time.Time) Adaptive {
	var a Adaptive
	if rate != nil && at != nil {
		a.Rate, a.At = *rate, *at
	}
	if halvedAt != nil {
		a.HalvedAt = *halvedAt
	}
	return a
}

// Current is the effective rate at now: Rate grown by a tenth of the
// configured rate a second since At, within [l.Min, l.Configured].
func (a Adaptive) Current(l AdaptiveLimit, now time.Time) float64 {
	if a.At.IsZero() {
		return l.Configured
	}
	grown := a.Rate + l.Configured/10*max(now.Sub(a.At).Seconds(), 0)
	return max(l.Min, min(l.Configured, grown))
}

// Slowdown is the state after a slowdown signal learnt at now, about a
// request sent at sent: the rate halved (not below l.Min), unless the
// request was sent before the last halving, at the rate that has been
// halved already (one overload halves once, however many of the requests
// then under way report it: TestAdaptiveOneHalvingPerOverload); either
// way it grows again only from now.
func (a Adaptive) Slowdown(l AdaptiveLimit, sent, now time.Time) Adaptive {
	cur := a.Current(l, now)
	if !a.HalvedAt.IsZero() && !sent.After(a.HalvedAt) {
		return Adaptive{Rate: cur, At: now, HalvedAt: a.HalvedAt}
	}
	return Adaptive{Rate: max(l.Min, cur/2), At: now, HalvedAt: now}
}

// AdaptivePace is the pace of deliveries to an endpoint under rl running
// at rate a second: DeliveryPace with the rate and the burst scaled by
// rate over the configured rate (at least 1), so a lowered rate is not
// undone by a burst sized for the configured one.
func AdaptivePace(rl sluice.RateLimit, rate float64) Pace {
	configured := rl.TokensPerSecond()
	if rate >= configured {
		return DeliveryPace(rl)
	}
	burst := max(1, float64(rl.Burst)*rate/configured)
	return deliveryPace(rate, burst)
}

// StartEmpty is bucket b of an adaptive endpoint, which starts empty
// rather than full: its first second goes at the rate, not as a burst of
// the configured size at a receiver not yet heard from (a burst of 1,000
// at one that takes 200 a second is 800 429s at once).
func StartEmpty(b Bucket, now time.Time) Bucket {
	if b.At.IsZero() {
		return Bucket{Tokens: 0, At: now}
	}
	return b
}

// RatePoint is the effective rate at one moment.
type RatePoint struct {
	At   time.Time
	Rate float64
}

// RateCurve is the effective rate over [from, to], from the slowdowns
// that set it (oldest first, the last one before from included): a point
// every step and at to; within each step, where the rate dropped (the rate
// before the step's first slowdown, then the lowest any of them left) and
// where it is back at the configured rate, if it gets there. So a chart of
// an hour has at most five points a step, however often the rate dropped.
// Before the first slowdown the rate is the configured one.
func RateCurve(changes []sluice.RateChange, l AdaptiveLimit, from, to time.Time, step time.Duration) []RatePoint {
	slowdowns := make([]Adaptive, len(changes))
	for i, c := range changes {
		slowdowns[i] = Adaptive{Rate: c.Rate, At: c.At}
	}
	var (
		out  []RatePoint
		cur  Adaptive // the state in force
		next int      // the first slowdown not yet in force
	)
	add := func(t time.Time, rate float64) { out = append(out, RatePoint{At: t, Rate: rate}) }
	for ; next < len(slowdowns) && !slowdowns[next].At.After(from); next++ {
		cur = slowdowns[next]
	}
	add(from, cur.Current(l, from))
	for t := from; t.Before(to); {
		end := t.Add(step)
		if end.After(to) {
			end = to
		}
		var lowest *Adaptive
		for ; next < len(slowdowns) && !slowdowns[next].At.After(end); next++ {
			s := slowdowns[next]
			if lowest == nil {
				add(s.At, cur.Current(l, s.At))
			}
			if lowest == nil || s.Current(l, s.At) < lowest.Current(l, lowest.At) {
				lowest = &s
			}
			cur = s
		}
		if lowest != nil {
			add(lowest.At, lowest.Current(l, lowest.At))
		}
		if back, ok := cur.recovered(l); ok && back.After(out[len(out)-1].At) && back.Before(end) {
			add(back, l.Configured)
		}
		add(end, cur.Current(l, end))
		t = end
	}
	return out
}

// recovered is when a has grown back to the configured rate; false for
// the zero value, which never left it.
func (a Adaptive) recovered(l AdaptiveLimit) (time.Time, bool) {
	if a.At.IsZero() || l.Configured <= 0 {
		return time.Time{}, false
	}
	gap := l.Configured - a.Current(l, a.At)
	return a.At.Add(time.Duration(gap / (l.Configured / 10) * float64(time.Second))), true
}

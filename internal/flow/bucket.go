// The rate limit is the token bucket that paces deliveries to one
// endpoint. It is pure arithmetic over a Bucket value; the store keeps the
// bucket on the endpoint row, so it survives restarts and is shared by every
// worker process. Tokens refill lazily from the time elapsed, at the
// endpoint's rate, up to its burst (ExactPace), or, for deliveries, a little
// less (DeliveryPace), so that no one-second window at the receiver carries
// more than burst + rate deliveries even when some requests take longer on
// the way than others.

package flow

import (
	"math"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// Pace is how a bucket fills: PerSecond tokens a second, up to Capacity.
type Pace struct {
	PerSecond float64
	Capacity  float64
}

// ExactPace is the pace rl names: its rate, up to its burst.
func ExactPace(rl sluice.RateLimit) Pace {
	return Pace{PerSecond: rl.TokensPerSecond(), Capacity: float64(rl.Burst)}
}

// Spread is how much longer one request to an endpoint may take than
// another between its start and its arrival (scheduling on a loaded box,
// on both ends, and the network) with the receiver still seeing no
// one-second window over burst + rate.
const Spread = 30 * time.Millisecond

// DeliveryPace is the pace of deliveries to an endpoint under rl. Requests
// whose arrivals fall within one second started within 1 s + Spread, and
// a bucket lets at most Capacity + PerSecond × (1 s + Spread) start there;
// so the spread comes out of the burst: Capacity is burst − rate × Spread,
// the rate unchanged. A burst too small to give that much (under rate ×
// Spread + 1) keeps one token, and the rate gives the rest: at burst 1 it
// is 1 / (1 + Spread) of rl's, 97 %.
func DeliveryPace(rl sluice.RateLimit) Pace {
	return deliveryPace(rl.TokensPerSecond(), float64(rl.Burst))
}

func deliveryPace(rate, burst float64) Pace {
	window := 1 + Spread.Seconds()
	if c := burst - rate*Spread.Seconds(); c >= 1 {
		return Pace{PerSecond: rate, Capacity: c}
	}
	return Pace{PerSecond: (burst + rate - 1) / window, Capacity: 1}
}

// Bucket is a token bucket's state at At.
type Bucket struct {
	Tokens float64
	At     time.Time
}

// Refill returns the bucket as it stands at now. A bucket never used starts
// full.
func (b Bucket) Refill(p Pace, now time.Time) Bucket {
	if b.At.IsZero() {
		return Bucket{Tokens: p.Capacity, At: now}
	}
	elapsed := max(now.Sub(b.At).Seconds(), 0)
	return Bucket{Tokens: min(p.Capacity, b.Tokens+elapsed*p.PerSecond), At: now}
}

// Available is the number of whole tokens in the bucket.
func (b Bucket) Available() int {
	return int(math.Floor(b.Tokens + 1e-9))
}

// Take removes n tokens.
func (b Bucket) Take(n int) Bucket {
	b.Tokens -= float64(n)
	return b
}

// SentAt restates a bucket that has just paid n tokens (Take) as if it
// had paid them at t, when the requests actually started, and moves its
// clock to t. Tokens are taken when deliveries are claimed, a moment before
// they are sent; had the bucket been full meanwhile, the refill of that
// moment would have been capped, and without this the next claim would
// get it anyway: a receiver could see a one-second window with more than
// burst + rate requests (rate × the delay more: 2 extra at 20/s after a
// 100ms stall on a busy box). With it, the bound holds for the times
// requests start, and nothing is forfeited unless the cap applied.
func (b Bucket) SentAt(p Pace, n int, t time.Time) Bucket {
	if !t.After(b.At) {
		return b
	}
	refilled := b.Tokens + t.Sub(b.At).Seconds()*p.PerSecond
	return Bucket{Tokens: min(p.Capacity-float64(n), refilled), At: t}
}

// Wait is how long until the bucket holds a whole token.
func (b Bucket) Wait(p Pace) time.Duration {
	missing := 1 - b.Tokens
	if missing <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(missing / p.PerSecond * float64(time.Second)))
}

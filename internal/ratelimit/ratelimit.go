// Package ratelimit is the token bucket that paces deliveries to one
// endpoint. It is pure arithmetic over a Bucket value; the store keeps the
// bucket on the endpoint row, so it survives restarts and is shared by every
// worker process. Tokens refill lazily from the time elapsed, at the
// endpoint's rate, up to its burst: no one-second window can carry more than
// burst + rate deliveries.
package ratelimit

import (
	"math"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// Bucket is a token bucket's state at At.
type Bucket struct {
	Tokens float64
	At     time.Time
}

// Refill returns the bucket as it stands at now. A bucket never used starts
// full.
func (b Bucket) Refill(rl sluice.RateLimit, now time.Time) Bucket {
	if b.At.IsZero() {
		return Bucket{Tokens: float64(rl.Burst), At: now}
	}
	elapsed := max(now.Sub(b.At).Seconds(), 0)
	return Bucket{Tokens: min(float64(rl.Burst), b.Tokens+elapsed*rl.TokensPerSecond()), At: now}
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
func (b Bucket) SentAt(rl sluice.RateLimit, n int, t time.Time) Bucket {
	if !t.After(b.At) {
		return b
	}
	refilled := b.Tokens + t.Sub(b.At).Seconds()*rl.TokensPerSecond()
	return Bucket{Tokens: min(float64(rl.Burst-n), refilled), At: t}
}

// Wait is how long until the bucket holds a whole token.
func (b Bucket) Wait(rl sluice.RateLimit) time.Duration {
	missing := 1 - b.Tokens
	if missing <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(missing / rl.TokensPerSecond() * float64(time.Second)))
}

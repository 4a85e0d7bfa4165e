package apirate

import (
	"math"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/flow"
)

// sweepEvery is how often a Limiter drops the buckets that have refilled
// to full: such a bucket is the same as no bucket, so dropping it changes
// nothing but the memory held.
const sweepEvery = time.Minute

// Limiter holds one token bucket per key, in memory. It is safe for
// concurrent use.
type Limiter[K comparable] struct {
	now func() time.Time

	mu      sync.Mutex
	buckets map[K]*bucket
	swept   time.Time
}

type bucket struct {
	state flow.Bucket
	rate  Rate
}

// Result is a Limiter's answer, with what the RateLimit headers say.
type Result struct {
	// Allowed is whether the tokens were taken.
	Allowed bool
	// Limit is the bucket's capacity.
	Limit int
	// Remaining is the whole tokens left (never below 0).
	Remaining int
	// Reset is how long until the bucket is full again.
	Reset time.Duration
	// RetryAfter is, when not Allowed, how long until the tokens asked
	// for are there.
	RetryAfter time.Duration
}

// NewLimiter returns an empty Limiter on the clock now (time.Now if nil).
func NewLimiter[K comparable](now func() time.Time) *Limiter[K] {
	if now == nil {
		now = time.Now
	}
	return &Limiter[K]{now: now, buckets: map[K]*bucket{}}
}

// Take takes n tokens from key's bucket at rate if it holds them, and
// nothing otherwise. A key's first bucket starts full; a change of rate
// keeps the tokens, capped at the new burst.
func (l *Limiter[K]) Take(key K, rate Rate, n int) Result {
	return l.take(key, rate, n, false)
}

// Charge takes n tokens from key's bucket whether or not it holds them: a
// charge for work already done, which may leave the bucket in debt that
// later requests wait for.
func (l *Limiter[K]) Charge(key K, rate Rate, n int) Result {
	return l.take(key, rate, n, true)
}

// Peek reports whether key's bucket holds n tokens at rate, taking none
// and keeping no bucket for a key it has not seen: for a check that must
// come before work whose outcome decides the charge (Charge).
func (l *Limiter[K]) Peek(key K, rate Rate, n int) Result {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := bucket{rate: rate}
	if held := l.buckets[key]; held != nil {
		b.state = held.state
	}
	b.state = b.state.Refill(flow.ExactPace(rate.limit), now)
	return b.result(b.state.Tokens+1e-9 >= float64(n), n)
}

func (l *Limiter[K]) take(key K, rate Rate, n int, force bool) Result {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) >= sweepEvery {
		l.sweep(now)
	}
	b := l.buckets[key]
	if b == nil {
		b = &bucket{}
		l.buckets[key] = b
	}
	b.rate = rate
	b.state = b.state.Refill(flow.ExactPace(rate.limit), now)
	allowed := force || b.state.Tokens+1e-9 >= float64(n)
	if allowed {
		b.state = b.state.Take(n)
	}
	return b.result(allowed, n)
}

// result describes b after a request for n tokens.
func (b *bucket) result(allowed bool, n int) Result {
	perSecond := b.rate.PerSecond()
	res := Result{
		Allowed:   allowed,
		Limit:     b.rate.Burst(),
		Remaining: max(0, int(math.Floor(b.state.Tokens+1e-9))),
		Reset:     seconds((float64(b.rate.Burst()) - b.state.Tokens) / perSecond),
	}
	if !allowed {
		res.RetryAfter = seconds((float64(n) - b.state.Tokens) / perSecond)
	}
	return res
}

// sweep drops the buckets that are full again at now; l.mu is held.
func (l *Limiter[K]) sweep(now time.Time) {
	l.swept = now
	for k, b := range l.buckets {
		if b.state.Refill(flow.ExactPace(b.rate.limit), now).Tokens >= float64(b.rate.Burst()) {
			delete(l.buckets, k)
		}
	}
}

// Len is the number of buckets held, for tests.
func (l *Limiter[K]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

func seconds(s float64) time.Duration {
	if s <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(s * float64(time.Second)))
}

// Seconds is d in whole seconds, rounded up: what a Retry-After or
// RateLimit-Reset header says.
func Seconds(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}

package dispatch

import (
	"math/rand/v2"
	"time"

	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// Retry decides what an attempt does to its delivery.
type Retry struct {
	// Schedule is the wait before each retry: len(Schedule)+1 attempts in all.
	Schedule []time.Duration
	// Jitter spreads each wait by up to ±Jitter of itself (default 0.2,
	// set by Config.Resolve).
	Jitter float64
}

// For is the retry policy of the target's attempts: its own schedule when
// it has one.
func (r Retry) For(t Target) Retry {
	if t.Retry != nil {
		r.Schedule = t.Retry
	}
	return r
}

// Outcome applies the retry policy to one attempt of c that got res at
// now: what the store records of the attempt, and what it does to the
// delivery. It is the one conversion of a send's result.
func (r Retry) Outcome(c Claimed, res send.Result, now time.Time) Outcome {
	o := Outcome{
		DeliveryID: c.ID, EventID: c.EventID,
		At: res.At, StatusCode: res.StatusCode, Error: res.Err,
		LatencyMS: int(res.Latency.Milliseconds()), ResponseBody: res.Body,
	}
	switch {
	case res.Delivered():
		o.Status = sluice.DeliveryDelivered
	case res.Throttled():
		// A 429 spends no retry budget and keeps the delivery due, in its
		// place in the queue: the endpoint as a whole is throttled.
		o.Status, o.NextAttemptAt = sluice.DeliveryPending, c.NextAttemptAt
		if c.FailureCount > 0 {
			o.Status = sluice.DeliveryFailed
		}
	case c.FailureCount+1 > len(r.Schedule):
		o.Status, o.Failed = sluice.DeliveryDead, true
	default:
		o.Status, o.Failed = sluice.DeliveryFailed, true
		wait := r.jitter(r.Schedule[c.FailureCount])
		if res.StatusCode == 503 {
			wait = max(wait, res.RetryAfter)
		}
		o.NextAttemptAt = now.Add(wait)
	}
	return o
}

func (r Retry) jitter(d time.Duration) time.Duration {
	j := r.Jitter
	return time.Duration(float64(d) * (1 - j + 2*j*rand.Float64()))
}

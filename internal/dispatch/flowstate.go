package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/flow"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Flow is an endpoint's flow state as it is kept: its token bucket and
// circuit breaker on the endpoint row, its throttle window (zero when not
// throttled) in destination_throttle. Package flow decides what they
// allow; flow.go applies that.
type Flow struct {
	Bucket   flow.Bucket
	Breaker  flow.Breaker
	Throttle flow.Throttle
	Adaptive flow.Adaptive // an adaptive rate limit's effective rate, beside the bucket
}

func flowFromRow(r dbq.LockEndpointForDispatchRow) Flow {
	e := r.Endpoint
	f := Flow{Breaker: breakerFromRow(e), Adaptive: flow.AdaptiveOf(e.AdaptiveRate, e.AdaptiveRateAt, e.AdaptiveHalvedAt)}
	if e.BucketTokens != nil && e.BucketAt != nil {
		f.Bucket = flow.Bucket{Tokens: *e.BucketTokens, At: *e.BucketAt}
	}
	if r.ThrottledUntil != nil {
		f.Throttle = flow.Throttle{Until: *r.ThrottledUntil, Reason: *r.ThrottleReason, Count: int(*r.Consecutive429s)}
	}
	return f
}

func breakerFromRow(e dbq.Endpoint) flow.Breaker {
	b := flow.Breaker{
		State: e.CircuitState, Failures: int(e.ConsecutiveFailures),
		OpenedAt: e.CircuitOpenedAt, NextProbeAt: e.CircuitNextProbeAt,
	}
	if e.CircuitProbeMs != nil {
		b.ProbeInterval = time.Duration(*e.CircuitProbeMs) * time.Millisecond
	}
	if e.LastError != nil {
		b.LastError = *e.LastError
	}
	return b
}

// EffectiveRateHistory is how long an endpoint's slowdowns are kept: the
// dashboard draws the last hour of its effective rate.
const EffectiveRateHistory = 2 * time.Hour

// saveFlow writes what changed from before to after in an endpoint's flow
// state.
func saveFlow(ctx context.Context, q *dbq.Queries, endpointID uuid.UUID, before, after Flow) error {
	if after.Throttle != before.Throttle {
		var err error
		if after.Throttle.Count == 0 {
			err = q.DeleteThrottle(ctx, endpointID)
		} else {
			err = q.UpsertThrottle(ctx, dbq.UpsertThrottleParams{
				EndpointID: endpointID, ThrottledUntil: after.Throttle.Until,
				Reason: after.Throttle.Reason, Consecutive429s: int32(after.Throttle.Count),
			})
		}
		if err != nil {
			return fmt.Errorf("save throttle: %w", err)
		}
	}
	if after.Bucket == before.Bucket && after.Breaker == before.Breaker && after.Adaptive == before.Adaptive {
		return nil
	}
	if err := q.SaveFlow(ctx, saveFlowParams(endpointID, after)); err != nil {
		return fmt.Errorf("save flow: %w", err)
	}
	if a := after.Adaptive; !a.At.IsZero() && !a.At.Equal(before.Adaptive.At) { // a slowdown: the dashboard's curve
		err := q.InsertEffectiveRateChange(ctx, dbq.InsertEffectiveRateChangeParams{
			EndpointID: endpointID, ChangedAt: a.At, Rate: a.Rate, ExpireBefore: a.At.Add(-EffectiveRateHistory),
		})
		if err != nil {
			return fmt.Errorf("save effective rate change: %w", err)
		}
	}
	return nil
}

func saveFlowParams(id uuid.UUID, f Flow) dbq.SaveFlowParams {
	p := dbq.SaveFlowParams{
		ID:                  id,
		CircuitState:        f.Breaker.State,
		ConsecutiveFailures: int32(f.Breaker.Failures),
		CircuitOpenedAt:     f.Breaker.OpenedAt,
		CircuitNextProbeAt:  f.Breaker.NextProbeAt,
	}
	if p.CircuitState == "" {
		p.CircuitState = sluice.CircuitClosed
	}
	if !f.Bucket.At.IsZero() {
		p.BucketTokens, p.BucketAt = new(f.Bucket.Tokens), new(f.Bucket.At)
	}
	if a := f.Adaptive; !a.At.IsZero() {
		p.AdaptiveRate, p.AdaptiveRateAt = new(a.Rate), new(a.At)
	}
	if a := f.Adaptive; !a.HalvedAt.IsZero() {
		p.AdaptiveHalvedAt = new(a.HalvedAt)
	}
	if f.Breaker.ProbeInterval > 0 {
		p.CircuitProbeMs = new(f.Breaker.ProbeInterval.Milliseconds())
	}
	if f.Breaker.LastError != "" {
		p.LastError = new(f.Breaker.LastError)
	}
	return p
}

package control

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// What the charts and the poll state of an endpoint's page are drawn from,
// each for an endpoint of the caller's scope. They are read by endpoint
// alone, so the endpoint is looked up through the scope first.

// AttemptStats is an endpoint's attempts in [since, until) counted per
// bucket of length bucket, the first bucket starting at since; buckets
// without attempts are left out.
func (c *Control) AttemptStats(ctx context.Context, who Caller, endpointID uuid.UUID, since, until time.Time, bucket time.Duration) ([]sluice.AttemptBucket, error) {
	if _, err := c.Endpoint(ctx, who, endpointID); err != nil {
		return nil, err
	}
	return c.store.AttemptStats(ctx, endpointID, since, until, bucket)
}

// EffectiveRateChanges is an adaptive endpoint's slowdowns since since,
// with the last one before it, oldest first: what flow.RateCurve draws its
// effective rate from.
func (c *Control) EffectiveRateChanges(ctx context.Context, who Caller, endpointID uuid.UUID, since time.Time) ([]sluice.RateChange, error) {
	if _, err := c.Endpoint(ctx, who, endpointID); err != nil {
		return nil, err
	}
	return c.store.EffectiveRateChanges(ctx, endpointID, since)
}

// PollCursor is how far a poll endpoint has been read: the last position
// given, the furthest cursor a reader passed and when.
func (c *Control) PollCursor(ctx context.Context, who Caller, endpointID uuid.UUID) (store.PollCursor, error) {
	if _, err := c.Endpoint(ctx, who, endpointID); err != nil {
		return store.PollCursor{}, err
	}
	return c.store.PollCursor(ctx, endpointID)
}

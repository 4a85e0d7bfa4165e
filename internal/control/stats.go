package control

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
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
	var rows []dbq.AttemptStatsRow
	err := c.store.InTx(ctx, func(tx store.Tx) error {
		var err error
		rows, err = tx.Q.AttemptStats(ctx, dbq.AttemptStatsParams{
			TenantID: who.Tenant, EndpointID: endpointID, Since: since, Until: until, BucketSeconds: int32(bucket / time.Second),
		})
		if err != nil {
			return fmt.Errorf("attempt stats: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("attempt stats: %w", err)
	}
	out := make([]sluice.AttemptBucket, len(rows))
	for i, r := range rows {
		out[i] = sluice.AttemptBucket{
			Start: r.Bucket, Delivered: r.Delivered, Throttled: r.Throttled, Failed: r.Failed,
			P50MS: r.P50Ms, P95MS: r.P95Ms,
		}
	}
	return out, nil
}

// EffectiveRateChanges is an adaptive endpoint's slowdowns since since,
// with the last one before it, oldest first: what flow.RateCurve draws its
// effective rate from.
func (c *Control) EffectiveRateChanges(ctx context.Context, who Caller, endpointID uuid.UUID, since time.Time) ([]sluice.RateChange, error) {
	if _, err := c.Endpoint(ctx, who, endpointID); err != nil {
		return nil, err
	}
	var rows []dbq.EffectiveRateChangesRow
	err := c.store.InTx(ctx, func(tx store.Tx) error {
		var err error
		rows, err = tx.Q.EffectiveRateChanges(ctx, dbq.EffectiveRateChangesParams{EndpointID: endpointID, Since: since})
		if err != nil {
			return fmt.Errorf("effective rate changes: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("effective rate changes: %w", err)
	}
	out := make([]sluice.RateChange, len(rows))
	for i, r := range rows {
		out[i] = sluice.RateChange{Rate: r.Rate, At: r.At}
	}
	return out, nil
}

// PollCursor is how far a poll endpoint has been read: the last position
// given, the furthest cursor a reader passed and when.
func (c *Control) PollCursor(ctx context.Context, who Caller, endpointID uuid.UUID) (PollCursor, error) {
	if _, err := c.Endpoint(ctx, who, endpointID); err != nil {
		return PollCursor{}, err
	}
	var row dbq.PollCursorRow
	err := c.store.InTx(ctx, func(tx store.Tx) error {
		var err error
		row, err = tx.Q.PollCursor(ctx, endpointID)
		return store.NotFound(err)
	})
	if err != nil {
		return PollCursor{}, fmt.Errorf("read poll cursor: %w", err)
	}
	return PollCursor(row), nil
}

// PollCursor is how far a poll endpoint has been read: the last position
// given, the furthest cursor a reader passed and when.
type PollCursor struct {
	LastPosition int64
	ReadPosition int64
	ReadAt       *time.Time
}

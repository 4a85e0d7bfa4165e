package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// AttemptStats returns an endpoint's attempts in [since, until) counted per
// bucket of length bucket, the first bucket starting at since. Buckets
// without attempts are left out. The caller checks the endpoint is the
// tenant's: attempts are read by endpoint alone.
func (s *Store) AttemptStats(ctx context.Context, endpointID uuid.UUID, since, until time.Time, bucket time.Duration) ([]sluice.AttemptBucket, error) {
	rows, err := s.q.AttemptStats(ctx, dbq.AttemptStatsParams{
		EndpointID: endpointID, Since: since, Until: until, BucketSeconds: int32(bucket / time.Second),
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

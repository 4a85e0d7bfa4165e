package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// EffectiveRateChanges returns an adaptive endpoint's slowdowns since
// since, with the last one before it, oldest first: what flow.RateCurve
// draws its effective rate from.
func (s *Store) EffectiveRateChanges(ctx context.Context, endpointID uuid.UUID, since time.Time) ([]sluice.RateChange, error) {
	rows, err := s.q.EffectiveRateChanges(ctx, dbq.EffectiveRateChangesParams{EndpointID: endpointID, Since: since})
	if err != nil {
		return nil, fmt.Errorf("effective rate changes: %w", err)
	}
	out := make([]sluice.RateChange, len(rows))
	for i, r := range rows {
		out[i] = sluice.RateChange{Rate: r.Rate, At: r.At}
	}
	return out, nil
}

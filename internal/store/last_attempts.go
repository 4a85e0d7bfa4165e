package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// LastAttempts returns the newest attempt of each of the deliveries (a
// page its caller has already read, so of one tenant) that has one, by
// delivery id: one query for a whole list.
func (s *Store) LastAttempts(ctx context.Context, deliveries []sluice.Delivery) (map[uuid.UUID]sluice.Attempt, error) {
	out := make(map[uuid.UUID]sluice.Attempt, len(deliveries))
	if len(deliveries) == 0 {
		return out, nil
	}
	ids := make([]uuid.UUID, len(deliveries))
	events := make([]uuid.UUID, len(deliveries))
	for i, d := range deliveries {
		ids[i], events[i] = d.ID, d.EventID
	}
	rows, err := s.q.LastAttempts(ctx, dbq.LastAttemptsParams{DeliveryIds: ids, EventIds: events})
	if err != nil {
		return nil, fmt.Errorf("last attempts: %w", err)
	}
	for _, r := range rows {
		out[r.DeliveryID] = attemptFromRow(r)
	}
	return out, nil
}

func attemptFromRow(a dbq.DeliveryAttempt) sluice.Attempt {
	out := sluice.Attempt{At: a.At, Error: a.Error, LatencyMS: int(a.LatencyMs), ResponseBody: a.ResponseBody}
	if a.StatusCode != nil {
		out.StatusCode = new(int(*a.StatusCode))
	}
	return out
}

package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Backlog is an enabled endpoint with a backlog alert, as the sweep's
// check reads it.
type Backlog struct {
	EndpointID uuid.UUID
	Alert      sluice.BacklogAlert
	Alerted    bool // its owner was told, and the backlog has not fallen below half since
	// Queued is its queued deliveries, counted up to Alert.Queued (up to
	// one without it).
	Queued int64
	// Waited is how long its first due delivery has waited; zero or less
	// while none is due.
	Waited time.Duration
}

// Backlogs returns up to limit endpoints with a backlog alert, in id
// order after after. Each costs an index read of its first queued
// deliveries, not a count of them all (queries/backlog.sql).
func (s *Store) Backlogs(ctx context.Context, after uuid.UUID, limit int) ([]Backlog, error) {
	rows, err := s.q.BacklogsToCheck(ctx, dbq.BacklogsToCheckParams{After: after, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("read backlogs: %w", err)
	}
	out := make([]Backlog, len(rows))
	for i, r := range rows {
		out[i] = Backlog{
			EndpointID: r.ID, Alerted: r.Alerted, Queued: r.Queued,
			Waited: time.Duration(r.Waited * float64(time.Second)),
			Alert:  *BacklogAlertOf(r.BacklogAlertQueued, r.BacklogAlertOldestSeconds),
		}
	}
	return out, nil
}

// BacklogAlertOf maps an endpoint row's backlog alert columns; nil when
// it has none.
func BacklogAlertOf(queued, oldestSeconds *int32) *sluice.BacklogAlert {
	return backlogAlertOf(dbq.Endpoint{BacklogAlertQueued: queued, BacklogAlertOldestSeconds: oldestSeconds})
}

// RearmBacklogAlerts lets the endpoints alert again: their backlog fell
// below half of every threshold.
func (s *Store) RearmBacklogAlerts(ctx context.Context, endpointIDs []uuid.UUID) error {
	if len(endpointIDs) == 0 {
		return nil
	}
	if err := s.q.RearmBacklogAlerts(ctx, endpointIDs); err != nil {
		return fmt.Errorf("rearm backlog alerts: %w", err)
	}
	return nil
}

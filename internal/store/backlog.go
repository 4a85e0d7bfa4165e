package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

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
			Alert:  *backlogAlertOf(dbq.Endpoint{BacklogAlertQueued: r.BacklogAlertQueued, BacklogAlertOldestSeconds: r.BacklogAlertOldestSeconds}),
		}
	}
	return out, nil
}

// RaiseBacklogAlert tells the owner of b's endpoint of its backlog, for
// reason (sluice.ReasonQueued or ReasonOldest), in one transaction: the
// endpoint marked alerted, the sluice.endpoint.backlog event posted and
// the email queued. It reports false, doing nothing, when the endpoint was
// alerted already, disabled or deleted meanwhile.
func (s *Store) RaiseBacklogAlert(ctx context.Context, jobs JobQueue, b Backlog, reason string) (bool, error) {
	raised := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		row, err := q.RaiseBacklogAlert(ctx, b.EndpointID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("mark backlog alerted: %w", err)
		}
		ev := sluice.OpEndpoint{ID: b.EndpointID, URL: row.Url, Consumer: row.Consumer}.Event(sluice.OpEndpointBacklog, reason)
		ev.Payload.Queued = new(row.Queued)
		ev.Payload.OldestDueSeconds = new(int64(max(b.Waited, 0) / time.Second))
		ev.Payload.BacklogAlert = backlogAlertOf(dbq.Endpoint{BacklogAlertQueued: row.BacklogAlertQueued, BacklogAlertOldestSeconds: row.BacklogAlertOldestSeconds})
		if err := InsertOpEvents(ctx, Tx{Tx: tx, Q: q}, jobs, row.TenantID, []sluice.OpEvent{ev}); err != nil {
			return err
		}
		raised = true
		return nil
	})
	return raised, err
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

package maintenance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/notify"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// backlog is an enabled endpoint with a backlog alert, as the check reads
// it.
type backlog struct {
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

// backlogPage is how many endpoints one statement of the backlog check
// reads.
const backlogPage = 1000

// checkBacklogs, run on the sweep's backlog turn, reads every endpoint with a
// backlog alert, a page at a time (readBacklogs), and tells the owner of
// each whose backlog reached a threshold (raiseBacklogAlert), once:
// an endpoint alerts again only after its backlog fell below half of every
// threshold (rearmBacklogAlerts). Its cost is a few index reads per
// such endpoint per BacklogInterval, whatever their backlogs.
func (s *Sweeper) checkBacklogs(ctx context.Context) error {
	var errs []error
	for after := uuid.Nil; ; {
		page, err := readBacklogs(ctx, s.store, after, backlogPage)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		errs = append(errs, s.alertBacklogs(ctx, page))
		if len(page) < backlogPage {
			return errors.Join(errs...)
		}
		after = page[len(page)-1].EndpointID
	}
}

// alertBacklogs raises and rearms the alerts of one page of backlogs.
func (s *Sweeper) alertBacklogs(ctx context.Context, page []backlog) error {
	var rearm []uuid.UUID
	for _, b := range page {
		if backlogRearms(b) {
			rearm = append(rearm, b.EndpointID)
			continue
		}
		reason := backlogReason(b)
		if reason == "" {
			continue
		}
		raised, err := s.raiseBacklogAlert(ctx, b, reason)
		if err != nil {
			return fmt.Errorf("backlog alert: %w", err)
		}
		if raised {
			s.cfg.Logger.Warn("endpoint backlog", "endpoint_id", b.EndpointID, "reason", reason,
				"queued", b.Queued, "waited", b.Waited.Round(time.Second))
		}
	}
	return rearmBacklogAlerts(ctx, s.store, rearm)
}

// raiseBacklogAlert tells the owner of b's endpoint of its backlog, for
// reason (sluice.ReasonQueued or ReasonOldest), in one transaction: the
// endpoint marked alerted, the sluice.endpoint.backlog event posted and
// the email queued (notify.PostOpEvents). It reports false, doing
// nothing, when the endpoint was alerted already, disabled or deleted
// meanwhile.
func (s *Sweeper) raiseBacklogAlert(ctx context.Context, b backlog, reason string) (bool, error) {
	raised := false
	err := s.store.InTx(ctx, func(tx store.Tx) error {
		row, err := tx.Q.RaiseBacklogAlert(ctx, b.EndpointID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("mark backlog alerted: %w", err)
		}
		ev := sluice.OpEndpoint{ID: b.EndpointID, URL: row.Url, Consumer: row.Consumer}.Event(sluice.OpEndpointBacklog, reason)
		ev.Payload.Queued = new(row.Queued)
		ev.Payload.OldestDueSeconds = new(int64(max(b.Waited, 0) / time.Second))
		ev.Payload.BacklogAlert = store.BacklogAlertOf(row.BacklogAlertQueued, row.BacklogAlertOldestSeconds)
		if err := notify.PostOpEvents(ctx, tx, s.cfg.Nudger, s.cfg.Clock.Now(), row.TenantID, []sluice.OpEvent{ev}); err != nil {
			return fmt.Errorf("post backlog event: %w", err)
		}
		raised = true
		return nil
	})
	return raised, err
}

// backlogReason is why b's owner is told now: sluice.ReasonQueued when its
// queued deliveries reached the threshold, sluice.ReasonOldest when its
// first due delivery has waited that long, "" when neither or when it was
// told already.
func backlogReason(b backlog) string {
	switch {
	case b.Alerted:
		return ""
	case b.Alert.Queued > 0 && b.Queued >= int64(b.Alert.Queued):
		return sluice.ReasonQueued
	case b.Alert.OldestSeconds > 0 && b.Waited >= time.Duration(b.Alert.OldestSeconds)*time.Second:
		return sluice.ReasonOldest
	}
	return ""
}

// backlogRearms reports whether an alerted b may alert again: its backlog
// is below half of every threshold set.
func backlogRearms(b backlog) bool {
	queuedLow := b.Alert.Queued == 0 || 2*b.Queued < int64(b.Alert.Queued)
	waitLow := b.Alert.OldestSeconds == 0 || 2*b.Waited < time.Duration(b.Alert.OldestSeconds)*time.Second
	return b.Alerted && queuedLow && waitLow
}

// readBacklogs reads up to limit endpoints with a backlog alert, in id
// order after after. Each costs an index read of its first queued
// deliveries, not a count of them all (queries/backlog.sql).
func readBacklogs(ctx context.Context, st *store.Store, after uuid.UUID, limit int) ([]backlog, error) {
	rows, err := st.OneShot(nil).BacklogsToCheck(ctx, dbq.BacklogsToCheckParams{After: after, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("read backlogs: %w", err)
	}
	out := make([]backlog, len(rows))
	for i, r := range rows {
		out[i] = backlog{
			EndpointID: r.ID, Alerted: r.Alerted, Queued: r.Queued,
			Waited: time.Duration(r.Waited * float64(time.Second)),
			Alert:  *store.BacklogAlertOf(r.BacklogAlertQueued, r.BacklogAlertOldestSeconds),
		}
	}
	return out, nil
}

// rearmBacklogAlerts lets the endpoints alert again: their backlog fell
// below half of every threshold.
func rearmBacklogAlerts(ctx context.Context, st *store.Store, endpointIDs []uuid.UUID) error {
	if len(endpointIDs) == 0 {
		return nil
	}
	if err := st.OneShot(nil).RearmBacklogAlerts(ctx, endpointIDs); err != nil {
		return fmt.Errorf("rearm backlog alerts: %w", err)
	}
	return nil
}

package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// AuditLog reads a page of a tenant's audit log, newest first.
func (s *Store) AuditLog(ctx context.Context, tenant uuid.UUID, f sluice.AuditFilter, p sluice.PageParams) (sluice.Page[sluice.AuditEntry], error) {
	rows, err := s.q.ListAuditEntries(ctx, dbq.ListAuditEntriesParams{
		TenantID: tenant, BeforeID: p.After,
		Action: optText(f.Action), ObjectID: optText(f.ObjectID), ActorID: optText(f.ActorID),
		Since: f.Since, Until: f.Until,
		Lim: limitRows(p),
	})
	if err != nil {
		return sluice.Page[sluice.AuditEntry]{}, fmt.Errorf("list audit entries: %w", err)
	}
	return page(rows, p, func(r dbq.ListAuditEntriesRow) uuid.UUID { return r.ID },
		func(r dbq.ListAuditEntriesRow) (sluice.AuditEntry, error) {
			return sluice.AuditEntry{
				ID: r.ID, At: r.At, Action: r.Action, ObjectID: r.ObjectID, SourceIP: r.SourceIp, Changed: r.Changed,
				Actor: sluice.Actor{Type: r.ActorType, ID: r.ActorID, Name: r.ActorName},
			}, nil
		})
}

// EnsureAuditMonth creates the audit log's partition of the month holding
// t, if it does not exist, and reports whether it did.
func (s *Store) EnsureAuditMonth(ctx context.Context, t time.Time) (bool, error) {
	created, err := s.q.EnsureAuditMonth(ctx, t)
	if err != nil {
		return false, fmt.Errorf("ensure audit month %s: %w", t.Format("2006-01"), err)
	}
	return created, nil
}

// DropAuditMonths drops the audit log's months that end before before,
// whole, and returns how many it dropped.
func (s *Store) DropAuditMonths(ctx context.Context, before time.Time) (int, error) {
	n, err := s.q.DropAuditMonths(ctx, before)
	if err != nil {
		return 0, fmt.Errorf("drop audit months before %s: %w", before.Format(time.RFC3339), err)
	}
	return int(n), nil
}

func optText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

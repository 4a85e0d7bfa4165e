package store

import (
	"context"
	"fmt"

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
	return Page(rows, p, func(r dbq.ListAuditEntriesRow) uuid.UUID { return r.ID },
		func(r dbq.ListAuditEntriesRow) (sluice.AuditEntry, error) {
			return sluice.AuditEntry{
				ID: r.ID, At: r.At, Action: r.Action, ObjectID: r.ObjectID, SourceIP: r.SourceIp, Changed: r.Changed,
				Actor: sluice.Actor{Type: r.ActorType, ID: r.ActorID, Name: r.ActorName},
			}, nil
		})
}

func optText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

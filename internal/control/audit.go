package control

import (
	"context"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// AuditLog is a page of the tenant's audit log matching f, newest first:
// a guarded read (ReadAuditLog). A portal caller has none.
func (c *Control) AuditLog(ctx context.Context, who Caller, f sluice.AuditFilter, p sluice.PageParams) (sluice.Page[sluice.AuditEntry], error) {
	if err := who.may(ReadAuditLog); err != nil {
		return sluice.Page[sluice.AuditEntry]{}, err
	}
	if who.portal() {
		return sluice.Page[sluice.AuditEntry]{}, sluice.ErrNotFound
	}
	return c.store.AuditLog(ctx, who.Tenant, f, p)
}

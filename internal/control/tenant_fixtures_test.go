package control_test

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// admin is a member of tenant A who may change everything but members.
func (b *testBundle) admin() control.Caller {
	return control.Caller{Tenant: b.f.TenantA.ID, Actor: sluice.Actor{Type: sluice.ActorMember, ID: "a", Name: "a@acme.test"},
		Role: sluice.RoleAdmin}
}

// portalOf is a portal session of tenant A's consumer uid.
func (b *testBundle) portalOf(uid string) control.Caller {
	return control.Caller{Tenant: b.f.TenantA.ID, Consumer: &uid, Actor: sluice.Actor{Type: sluice.ActorPortal, ID: uid, Name: uid},
		Role: sluice.RoleOwner}
}

// lastEntry is the tenant's newest audit entry, of which there are n.
func (b *testBundle) lastEntry(t *testing.T, who control.Caller, n int) sluice.AuditEntry {
	t.Helper()
	log := b.auditLog(t, who)
	if len(log) != n {
		t.Fatalf("audit log has %d entries, want %d: %+v", len(log), n, log)
	}
	return log[0]
}

func ptr[T any](v T) *T { return &v }

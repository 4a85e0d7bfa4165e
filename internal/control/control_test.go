package control_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// testBundle is one test's Control on a fresh store with two tenants.
type testBundle struct {
	f   storetest.Fixture
	ctl *control.Control
	// owner is tenant A's API key; viewer a member of A who may change
	// nothing; other is tenant B's key.
	owner, viewer, other control.Caller
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	f := storetest.New(t)
	key := sluice.Actor{Type: sluice.ActorAPIKey, ID: "key-a", Name: "a"}
	return &testBundle{
		f:      f,
		ctl:    control.New(control.Config{Store: f.Store, Nudger: f.Jobs, AllowPrivateTargets: true}),
		owner:  control.Caller{Tenant: f.TenantA.ID, Actor: key, Role: sluice.RoleOwner, SourceIP: "192.0.2.1"},
		viewer: control.Caller{Tenant: f.TenantA.ID, Actor: sluice.Actor{Type: sluice.ActorMember, ID: "m", Name: "v@acme.test"}, Role: sluice.RoleViewer},
		other:  control.Caller{Tenant: f.TenantB.ID, Actor: key, Role: sluice.RoleOwner},
	}
}

// auditLog is the tenant's audit log, newest first.
func (b *testBundle) auditLog(t *testing.T, who control.Caller) []sluice.AuditEntry {
	t.Helper()
	page, err := b.f.Store.AuditLog(context.Background(), who.Tenant, sluice.AuditFilter{}, sluice.PageParams{Limit: sluice.MaxPageLimit})
	require.NoError(t, err)
	return page.Items
}

func (b *testBundle) endpoint(t *testing.T, who control.Caller) sluice.Endpoint {
	t.Helper()
	set := sluice.EndpointSettings{URL: "http://127.0.0.1:9/hook", MaxInFlight: sluice.DefaultMaxInFlight, Ordering: sluice.OrderingNone}
	ep, err := b.f.Store.CreateEndpoint(context.Background(), who.Tenant, set, storetest.Secret)
	require.NoError(t, err)
	return ep
}

func TestDeleteEndpoint(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ep := b.endpoint(t, b.owner)

	err := b.ctl.DeleteEndpoint(ctx, b.viewer, ep.ID)
	require.ErrorIs(t, err, sluice.ErrForbidden, "a viewer changes nothing")
	require.ErrorIs(t, b.ctl.DeleteEndpoint(ctx, b.other, ep.ID), sluice.ErrNotFound, "another tenant's endpoint")
	require.Empty(t, b.auditLog(t, b.owner), "a refused change records nothing")

	require.NoError(t, b.ctl.DeleteEndpoint(ctx, b.owner, ep.ID))
	_, err = b.ctl.Endpoint(ctx, b.owner, ep.ID)
	require.ErrorIs(t, err, sluice.ErrNotFound)
	log := b.auditLog(t, b.owner)
	require.Len(t, log, 1)
	require.Equal(t, string(control.EndpointDeleted), log[0].Action)
	require.Equal(t, ep.ID.String(), *log[0].ObjectID)
	require.Equal(t, "192.0.2.1", *log[0].SourceIP)
	require.Equal(t, b.owner.Actor, log[0].Actor)
}

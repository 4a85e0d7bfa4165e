package control_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// TestSetTenantRetention: every member reads the tenant's retention (the
// server's until it sets its own); a viewer and a portal session change
// nothing; a value out of [1h, the server's] or not a duration is a
// validation error naming its field; a change records
// tenant.retention_updated with the fields it changed, leaves the field
// it does not name, and null goes back to the server's.
func TestSetTenantRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	set := func(s string) control.DurationChange { return control.DurationChange{Set: true, Value: &s} }

	got, err := b.ctl.TenantSettings(ctx, b.viewer)
	require.NoError(t, err)
	require.Nil(t, got.Retention)
	require.Nil(t, got.DeadRetention)
	require.Equal(t, control.DefaultRetention, got.ServerRetention)
	require.Equal(t, control.DefaultDeadRetention, got.ServerDeadRetention)
	require.Equal(t, b.f.TenantA.ID, got.Tenant.ID)
	_, err = b.ctl.TenantSettings(ctx, b.portalOf("cus_1"))
	require.ErrorIs(t, err, sluice.ErrNotFound)

	_, err = b.ctl.SetTenantRetention(ctx, b.viewer, control.RetentionChange{Retention: set("24h")})
	require.ErrorIs(t, err, sluice.ErrForbidden)
	_, err = b.ctl.SetTenantRetention(ctx, b.portalOf("cus_1"), control.RetentionChange{Retention: set("24h")})
	require.Error(t, err)
	for _, bad := range []struct{ field, value string }{
		{"retention", "30m"}, {"retention", "337h"}, {"retention", "a day"}, {"dead_retention", "721h"}, {"dead_retention", "0"},
	} {
		in := control.RetentionChange{Retention: set(bad.value)}
		if bad.field == "dead_retention" {
			in = control.RetentionChange{DeadRetention: set(bad.value)}
		}
		_, err = b.ctl.SetTenantRetention(ctx, b.owner, in)
		var v *sluice.ValidationError
		require.ErrorAs(t, err, &v, "%s=%s", bad.field, bad.value)
		require.Equal(t, bad.field, v.Fields[0].Field)
	}
	require.Empty(t, b.auditLog(t, b.owner))

	got, err = b.ctl.SetTenantRetention(ctx, b.owner, control.RetentionChange{Retention: set("24h"), DeadRetention: set("72h")})
	require.NoError(t, err)
	require.Equal(t, 24*time.Hour, *got.Retention)
	require.Equal(t, 72*time.Hour, *got.DeadRetention)
	e := b.lastEntry(t, b.owner, 1)
	require.Equal(t, string(control.TenantRetentionUpdated), e.Action)
	require.Equal(t, []string{"retention", "dead_retention"}, e.Changed)

	got, err = b.ctl.SetTenantRetention(ctx, b.owner, control.RetentionChange{Retention: control.DurationChange{Set: true}})
	require.NoError(t, err)
	require.Nil(t, got.Retention, "null is the server's")
	require.Equal(t, 72*time.Hour, *got.DeadRetention, "a field not named stays")
	require.Equal(t, []string{"retention"}, b.lastEntry(t, b.owner, 2).Changed)

	got, err = b.ctl.TenantSettings(ctx, b.owner)
	require.NoError(t, err)
	require.Nil(t, got.Retention)
	require.Equal(t, 72*time.Hour, *got.DeadRetention)
	other, err := b.ctl.TenantSettings(ctx, b.other)
	require.NoError(t, err)
	require.Nil(t, other.DeadRetention, "another tenant's own")

	require.Equal(t, "72h", control.FormatDuration(72*time.Hour))
	require.Equal(t, "1h30m", control.FormatDuration(90*time.Minute))
}

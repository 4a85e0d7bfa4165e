package control_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// TestAPIKeys: a key is made here and shown once; it authenticates until
// revoked; a viewer and a portal session may do neither; another tenant's
// key is not found; creation and revocation are audited, authentication
// is not.
func TestAPIKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	_, err := b.ctl.CreateAPIKey(ctx, b.viewer, sluice.NewAPIKeyParams{Name: "ci"})
	require.ErrorIs(t, err, sluice.ErrForbidden)
	_, err = b.ctl.CreateAPIKey(ctx, b.portalOf("cus_1"), sluice.NewAPIKeyParams{Name: "ci"})
	require.ErrorIs(t, err, sluice.ErrNotFound)
	past := time.Now().Add(-time.Hour)
	_, err = b.ctl.CreateAPIKey(ctx, b.owner, sluice.NewAPIKeyParams{Name: "ci", ExpiresAt: &past})
	var v *sluice.ValidationError
	require.ErrorAs(t, err, &v)
	require.Equal(t, "expires_at", v.Fields[0].Field)
	require.Empty(t, b.auditLog(t, b.owner))

	k, err := b.ctl.CreateAPIKey(ctx, b.admin(), sluice.NewAPIKeyParams{Name: "ci"})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(k.Key, "sk_"))
	require.True(t, strings.HasPrefix(k.Key, k.Prefix))
	e := b.lastEntry(t, b.owner, 1)
	require.Equal(t, string(control.APIKeyCreated), e.Action)
	require.Equal(t, k.ID.String(), *e.ObjectID)
	require.NotContains(t, strings.Join(e.Changed, " "), k.Key)

	cred, err := b.ctl.Authenticate(ctx, k.Key)
	require.NoError(t, err)
	require.Equal(t, b.f.TenantA.ID, cred.Tenant.ID)
	require.Equal(t, k.ID, cred.APIKeyID)
	_, err = b.ctl.Authenticate(ctx, "sk_nonsense")
	require.ErrorIs(t, err, sluice.ErrNotFound, "malformed")
	_, err = b.ctl.Authenticate(ctx, b.f.KeyB)
	require.NoError(t, err)

	got, err := b.ctl.APIKey(ctx, b.owner, k.ID)
	require.NoError(t, err)
	require.Equal(t, "ci", got.Name)
	_, err = b.ctl.APIKey(ctx, b.other, k.ID)
	require.ErrorIs(t, err, sluice.ErrNotFound, "another tenant's key")
	page, err := b.ctl.APIKeys(ctx, b.owner, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 2, "the tenant's first key and this one")

	require.ErrorIs(t, b.ctl.RevokeAPIKey(ctx, b.viewer, k.ID), sluice.ErrForbidden)
	require.ErrorIs(t, b.ctl.RevokeAPIKey(ctx, b.other, k.ID), sluice.ErrNotFound)
	require.ErrorIs(t, b.ctl.RevokeAPIKey(ctx, b.owner, uuid.New()), sluice.ErrNotFound)
	require.NoError(t, b.ctl.RevokeAPIKey(ctx, b.owner, k.ID))
	e = b.lastEntry(t, b.owner, 2)
	require.Equal(t, string(control.APIKeyRevoked), e.Action)
	require.Equal(t, k.ID.String(), *e.ObjectID)
	_, err = b.ctl.Authenticate(ctx, k.Key)
	require.ErrorIs(t, err, sluice.ErrNotFound, "revoked")
}

// TestKeySessions: a session opened with a key is found by its token
// until signed out, and ends with its key.
func TestKeySessions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	k, err := b.ctl.CreateAPIKey(ctx, b.owner, sluice.NewAPIKeyParams{Name: "laptop"})
	require.NoError(t, err)
	cred, err := b.ctl.Authenticate(ctx, k.Key)
	require.NoError(t, err)

	one, err := b.ctl.OpenKeySession(ctx, cred)
	require.NoError(t, err)
	require.True(t, control.WellFormedSessionToken(one.Token))
	require.WithinDuration(t, time.Now().Add(control.SessionTTL), one.ExpiresAt, time.Minute)
	two, err := b.ctl.OpenKeySession(ctx, cred)
	require.NoError(t, err)
	s, err := b.ctl.Session(ctx, one.Token)
	require.NoError(t, err)
	require.Equal(t, k.ID, *s.APIKeyID)
	require.Equal(t, b.f.TenantA.ID, s.Tenant.ID)

	require.NoError(t, b.ctl.EndSession(ctx, one.Token))
	_, err = b.ctl.Session(ctx, one.Token)
	require.ErrorIs(t, err, sluice.ErrNotFound, "signed out")
	_, err = b.ctl.Session(ctx, "not a token")
	require.ErrorIs(t, err, sluice.ErrNotFound)

	require.NoError(t, b.ctl.RevokeAPIKey(ctx, b.owner, k.ID))
	_, err = b.ctl.Session(ctx, two.Token)
	require.ErrorIs(t, err, sluice.ErrNotFound, "its key was revoked")
	_, err = b.ctl.OpenKeySession(ctx, cred)
	require.ErrorIs(t, err, sluice.ErrNotFound, "a key revoked meanwhile")
}

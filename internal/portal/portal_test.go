package portal

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func tokenOf(t *testing.T, link sluice.PortalLink) string {
	t.Helper()
	u, err := url.Parse(link.URL)
	require.NoError(t, err)
	require.Equal(t, Path, u.Path)
	return u.Query().Get("token")
}

// TestLinkOpens: a link opens to its consumer until it expires, read-only
// when made so, and not at all after revocation, deletion or a forgery.
func TestLinkOpens(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx := t.Context()
	_, _, err := f.Store.UpsertConsumer(ctx, f.TenantA.ID, "cus_1", sluice.ConsumerSettings{Name: "One"})
	require.NoError(t, err)
	l := New(f.Store, testKey, "https://sluice.example")
	now := time.Now()
	l.now = func() time.Time { return now }

	link, err := l.Link(ctx, f.TenantA.ID, "cus_1", time.Hour, true)
	require.NoError(t, err)
	require.Contains(t, link.URL, "https://sluice.example/portal?token=")
	g, err := l.Open(ctx, tokenOf(t, link))
	require.NoError(t, err)
	require.Equal(t, "cus_1", g.Target.Consumer.UID)
	require.Equal(t, f.TenantA.ID, g.Target.Tenant.ID)
	require.True(t, g.ReadOnly)
	require.WithinDuration(t, now.Add(time.Hour), g.ExpiresAt, time.Second)

	_, err = l.Link(ctx, f.TenantB.ID, "cus_1", time.Hour, false)
	require.ErrorIs(t, err, sluice.ErrNotFound, "another tenant's consumer")

	now = now.Add(time.Hour + time.Second)
	_, err = l.Open(ctx, tokenOf(t, link))
	require.ErrorIs(t, err, ErrInvalidLink, "expired")
	now = now.Add(-time.Hour)

	other := New(f.Store, []byte("another key, another deployment!"), "https://sluice.example")
	_, err = other.Open(ctx, tokenOf(t, link))
	require.ErrorIs(t, err, ErrInvalidLink, "signed with another key")

	tok := []byte(tokenOf(t, link))
	for i := range tok { // flip one character anywhere: never accepted
		bad := append([]byte(nil), tok...)
		bad[i] ^= 1
		if _, err := l.Open(ctx, string(bad)); err == nil {
			t.Fatalf("a token with character %d changed opened", i)
		}
	}
	for _, bad := range []string{"", "x", string(tok[:len(tok)-2]), string(tok) + "A"} {
		_, err := l.Open(ctx, bad)
		require.ErrorIs(t, err, ErrInvalidLink, "%q", bad)
	}

	require.NoError(t, f.Store.RevokePortal(ctx, f.TenantA.ID, "cus_1"))
	_, err = l.Open(ctx, tokenOf(t, link))
	require.ErrorIs(t, err, ErrInvalidLink, "revoked")
	fresh, err := l.Link(ctx, f.TenantA.ID, "cus_1", time.Minute, false)
	require.NoError(t, err)
	g, err = l.Open(ctx, tokenOf(t, fresh))
	require.NoError(t, err, "a link made after the revocation works")
	require.False(t, g.ReadOnly)

	require.NoError(t, f.Store.DeleteConsumer(ctx, f.TenantA.ID, "cus_1"))
	_, _, err = f.Store.UpsertConsumer(ctx, f.TenantA.ID, "cus_1", sluice.ConsumerSettings{})
	require.NoError(t, err)
	_, err = l.Open(ctx, tokenOf(t, fresh))
	require.ErrorIs(t, err, ErrInvalidLink, "a deleted consumer's link does not open its namesake")
}

package control_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestPutConsumer: a viewer and a portal session change nothing; the first
// put creates (consumer.created), the next updates (consumer.updated)
// naming the fields it changed; the rules refuse a bad address.
func TestPutConsumer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	_, _, err := b.ctl.PutConsumer(ctx, b.viewer, "cus_1", control.ConsumerInput{Name: "One"})
	require.ErrorIs(t, err, sluice.ErrForbidden)
	_, _, err = b.ctl.PutConsumer(ctx, b.portalOf("cus_1"), "cus_1", control.ConsumerInput{Name: "One"})
	require.ErrorIs(t, err, sluice.ErrNotFound)
	_, _, err = b.ctl.PutConsumer(ctx, b.owner, "cus_1", control.ConsumerInput{AlertEmail: ptr("Ops <ops@one.test>")})
	var v *sluice.ValidationError
	require.ErrorAs(t, err, &v)
	require.Equal(t, "alert_email", v.Fields[0].Field)
	require.Empty(t, b.auditLog(t, b.owner))

	c, created, err := b.ctl.PutConsumer(ctx, b.owner, "cus_1", control.ConsumerInput{Name: "One"})
	require.NoError(t, err)
	require.True(t, created)
	e := b.lastEntry(t, b.owner, 1)
	require.Equal(t, string(control.ConsumerCreated), e.Action)
	require.Equal(t, "cus_1", *e.ObjectID)

	c2, created, err := b.ctl.PutConsumer(ctx, b.owner, "cus_1", control.ConsumerInput{Name: "One", AlertEmail: ptr("ops@one.test")})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, c.ID, c2.ID)
	require.Equal(t, "ops@one.test", *c2.AlertEmail)
	e = b.lastEntry(t, b.owner, 2)
	require.Equal(t, string(control.ConsumerUpdated), e.Action)
	require.Equal(t, []string{"alert_email"}, e.Changed)

	_, err = b.ctl.Consumer(ctx, b.other, "cus_1")
	require.ErrorIs(t, err, sluice.ErrNotFound, "another tenant's consumer")
	page, err := b.ctl.Consumers(ctx, b.owner, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
}

// TestCreateAndUpdateConsumer: the dashboard's forms create only a new
// uid and update only an existing one.
func TestCreateAndUpdateConsumer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	_, err := b.ctl.UpdateConsumer(ctx, b.owner, "cus_1", control.ConsumerInput{Name: "One"})
	require.ErrorIs(t, err, sluice.ErrNotFound)
	_, err = b.ctl.CreateConsumer(ctx, b.owner, "not a uid!", control.ConsumerInput{})
	var v *sluice.ValidationError
	require.ErrorAs(t, err, &v)
	require.Equal(t, "uid", v.Fields[0].Field)
	_, err = b.ctl.CreateConsumer(ctx, b.owner, "cus_1", control.ConsumerInput{Name: "One"})
	require.NoError(t, err)
	_, err = b.ctl.CreateConsumer(ctx, b.owner, "cus_1", control.ConsumerInput{Name: "Again"})
	require.ErrorIs(t, err, sluice.ErrConflict)
	_, err = b.ctl.UpdateConsumer(ctx, b.other, "cus_1", control.ConsumerInput{Name: "Theirs"})
	require.ErrorIs(t, err, sluice.ErrNotFound, "another tenant's consumer")
	c, err := b.ctl.UpdateConsumer(ctx, b.admin(), "cus_1", control.ConsumerInput{Name: "Uno"})
	require.NoError(t, err)
	require.Equal(t, "Uno", c.Name)
	e := b.lastEntry(t, b.owner, 2)
	require.Equal(t, string(control.ConsumerUpdated), e.Action)
	require.Equal(t, []string{"name"}, e.Changed)
	require.Equal(t, "a@acme.test", e.Actor.Name)
}

// TestDeleteConsumer: the consumer goes with its endpoints.
func TestDeleteConsumer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, _, err := b.ctl.PutConsumer(ctx, b.owner, "cus_1", control.ConsumerInput{})
	require.NoError(t, err)
	uid := "cus_1"
	set := sluice.EndpointSettings{URL: "http://127.0.0.1:9/hook", MaxInFlight: sluice.DefaultMaxInFlight, Ordering: sluice.OrderingNone, Consumer: &uid}
	ep, err := b.f.Store.CreateEndpoint(ctx, b.f.TenantA.ID, set, storetest.Secret)
	require.NoError(t, err)

	require.ErrorIs(t, b.ctl.DeleteConsumer(ctx, b.viewer, "cus_1"), sluice.ErrForbidden)
	require.ErrorIs(t, b.ctl.DeleteConsumer(ctx, b.other, "cus_1"), sluice.ErrNotFound)
	require.ErrorIs(t, b.ctl.DeleteConsumer(ctx, b.portalOf("cus_1"), "cus_1"), sluice.ErrNotFound)
	require.Len(t, b.auditLog(t, b.owner), 1, "the put only")

	require.NoError(t, b.ctl.DeleteConsumer(ctx, b.owner, "cus_1"))
	_, err = b.ctl.Endpoint(ctx, b.owner, ep.ID)
	require.ErrorIs(t, err, sluice.ErrNotFound, "its endpoint went with it")
	e := b.lastEntry(t, b.owner, 2)
	require.Equal(t, string(control.ConsumerDeleted), e.Action)
	require.Equal(t, "cus_1", *e.ObjectID)
}

// TestPortalLinks: a link opens to its consumer until it expires, read-only
// when made so, and not at all after revocation, deletion or a forgery;
// making and revoking links are audited, opening them is not.
func TestPortalLinks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	now := time.Now()
	key := []byte("0123456789abcdef0123456789abcdef")
	ctl := control.New(control.Config{Store: b.f.Store, Nudger: b.f.Jobs, PortalKey: key, PublicURL: "https://sluice.example",
		Now: func() time.Time { return now }})
	_, _, err := ctl.PutConsumer(ctx, b.owner, "cus_1", control.ConsumerInput{Name: "One"})
	require.NoError(t, err)
	token := func(l sluice.PortalLink) string {
		u, err := url.Parse(l.URL)
		require.NoError(t, err)
		require.Equal(t, control.PortalPath, u.Path)
		return u.Query().Get("token")
	}

	_, err = ctl.CreatePortalLink(ctx, b.viewer, "cus_1", control.PortalLinkInput{})
	require.ErrorIs(t, err, sluice.ErrForbidden)
	_, err = ctl.CreatePortalLink(ctx, b.other, "cus_1", control.PortalLinkInput{})
	require.ErrorIs(t, err, sluice.ErrNotFound, "another tenant's consumer")
	_, err = ctl.CreatePortalLink(ctx, b.owner, "cus_1", control.PortalLinkInput{TTLSeconds: ptr(int64(8 * 24 * 3600))})
	var v *sluice.ValidationError
	require.ErrorAs(t, err, &v)
	require.Equal(t, "ttl_seconds", v.Fields[0].Field)

	link, err := ctl.CreatePortalLink(ctx, b.owner, "cus_1", control.PortalLinkInput{TTLSeconds: ptr(int64(3600)), ReadOnly: true})
	require.NoError(t, err)
	require.Contains(t, link.URL, "https://sluice.example/portal?token=")
	e := b.lastEntry(t, b.owner, 2)
	require.Equal(t, string(control.PortalLinkCreated), e.Action)
	require.Equal(t, "cus_1", *e.ObjectID)
	require.NotContains(t, e.Changed, token(link))

	g, err := ctl.OpenPortalLink(ctx, token(link))
	require.NoError(t, err)
	require.Equal(t, "cus_1", g.Target.Consumer.UID)
	require.Equal(t, b.f.TenantA.ID, g.Target.Tenant.ID)
	require.True(t, g.ReadOnly)
	require.WithinDuration(t, now.Add(time.Hour), g.ExpiresAt, time.Second)
	s, err := ctl.OpenPortalSession(ctx, g)
	require.NoError(t, err)
	got, err := ctl.Session(ctx, s.Token)
	require.NoError(t, err)
	require.Equal(t, "cus_1", got.Consumer.UID)
	require.True(t, got.ReadOnly)
	require.Len(t, b.auditLog(t, b.owner), 2, "opening a link records nothing")

	now = now.Add(time.Hour + time.Second)
	_, err = ctl.OpenPortalLink(ctx, token(link))
	require.ErrorIs(t, err, control.ErrInvalidLink, "expired")
	now = now.Add(-time.Hour)

	other := control.New(control.Config{Store: b.f.Store, PortalKey: []byte("another key, another deployment!"), Now: func() time.Time { return now }})
	_, err = other.OpenPortalLink(ctx, token(link))
	require.ErrorIs(t, err, control.ErrInvalidLink, "signed with another key")
	tok := []byte(token(link))
	for i := range tok { // flip one character anywhere: never accepted
		bad := append([]byte(nil), tok...)
		bad[i] ^= 1
		if _, err := ctl.OpenPortalLink(ctx, string(bad)); err == nil {
			t.Fatalf("a token with character %d changed opened", i)
		}
	}
	for _, bad := range []string{"", "x", string(tok[:len(tok)-2]), string(tok) + "A"} {
		_, err := ctl.OpenPortalLink(ctx, bad)
		require.ErrorIs(t, err, control.ErrInvalidLink, "%q", bad)
	}

	require.ErrorIs(t, ctl.RevokePortal(ctx, b.viewer, "cus_1"), sluice.ErrForbidden)
	require.ErrorIs(t, ctl.RevokePortal(ctx, b.other, "cus_1"), sluice.ErrNotFound)
	require.NoError(t, ctl.RevokePortal(ctx, b.admin(), "cus_1"))
	e = b.lastEntry(t, b.owner, 3)
	require.Equal(t, string(control.PortalLinkRevoked), e.Action)
	require.Equal(t, "cus_1", *e.ObjectID)
	_, err = ctl.OpenPortalLink(ctx, token(link))
	require.ErrorIs(t, err, control.ErrInvalidLink, "revoked")
	_, err = ctl.Session(ctx, s.Token)
	require.ErrorIs(t, err, sluice.ErrNotFound, "its sessions ended")

	fresh, err := ctl.CreatePortalLink(ctx, b.owner, "cus_1", control.PortalLinkInput{})
	require.NoError(t, err)
	g, err = ctl.OpenPortalLink(ctx, token(fresh))
	require.NoError(t, err, "a link made after the revocation works")
	require.False(t, g.ReadOnly)
	require.WithinDuration(t, now.Add(control.DefaultPortalTTL), g.ExpiresAt, time.Second)

	require.NoError(t, ctl.DeleteConsumer(ctx, b.owner, "cus_1"))
	_, _, err = ctl.PutConsumer(ctx, b.owner, "cus_1", control.ConsumerInput{})
	require.NoError(t, err)
	_, err = ctl.OpenPortalLink(ctx, token(fresh))
	require.ErrorIs(t, err, control.ErrInvalidLink, "a deleted consumer's link does not open its namesake")
}

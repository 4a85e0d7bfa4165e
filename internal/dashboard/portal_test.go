package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// portalWorld is tenant A with two consumers, c1 and c2, and an endpoint
// each (c1's, c2's and the tenant's own), each with a dead delivery of an
// event addressed to it, and one broadcast that reached all three.
type portalWorld struct {
	c1, c2, own seeded
	broadcast   sluice.Event
	store       *store.Store
	url         string
}

func (b *bundle) portalWorld() portalWorld {
	w := portalWorld{store: b.store, url: b.srv.URL}
	for _, uid := range []string{"c1", "c2"} {
		_, _, err := b.store.UpsertConsumer(context.Background(), b.tenantA.ID, uid, sluice.ConsumerSettings{Name: "Consumer " + uid})
		require.NoError(b.t, err)
	}
	w.c1 = b.seedFor(b.tenantA, "c1", "https://c1.test/hooks")
	w.c2 = b.seedFor(b.tenantA, "c2", "https://c2.test/hooks")
	w.own = b.seedFor(b.tenantA, "", "https://own.acme.test/hooks")
	w.broadcast = b.postEvent(b.tenantA, sluice.NewEvent{Type: "notice.sent", Payload: json.RawMessage(`{"all":true}`), Broadcast: true})
	return w
}

// seedFor creates an endpoint of consumer uid ("" for the tenant's own)
// subscribed to everything, posts one event addressed to it and lets its
// delivery die.
func (b *bundle) seedFor(tenant sluice.Tenant, uid, url string) seeded {
	t := b.t
	t.Helper()
	ctx := context.Background()
	set := sluice.EndpointSettings{URL: url, Description: "hooks of " + uid, MaxInFlight: 10}
	ev := sluice.NewEvent{Type: "order.created", Payload: json.RawMessage(`{"for":"` + uid + `"}`)}
	if uid != "" {
		set.Consumer, ev.Consumer = &uid, &uid
	}
	ep, err := b.store.CreateEndpoint(ctx, tenant.ID, set, storetest.Secret)
	secret := storetest.Secret
	require.NoError(t, err)
	_, err = b.store.CreateSubscription(ctx, tenant.ID, ep.ID, []string{"*"}, nil)
	require.NoError(t, err)
	s := seeded{endpoint: ep, event: b.postEvent(tenant, ev), secret: secret}
	b.kill(ep.ID, 500, "boom", "down")
	page, err := b.store.ListDeliveries(ctx, tenant.ID, sluice.DeliveryFilter{EndpointID: &ep.ID}, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	s.delivery = page.Items[0]
	return s
}

// postEvent stores an event and fans it out at once.
func (b *bundle) postEvent(tenant sluice.Tenant, ev sluice.NewEvent) sluice.Event {
	b.t.Helper()
	ctx := context.Background()
	out, _, err := fanout.InsertOne(ctx, b.store, tenant.ID, ev, b.jobs)
	require.NoError(b.t, err)
	_, _, err = fanout.Events(ctx, b.store, []uuid.UUID{out.ID}, nil)
	require.NoError(b.t, err)
	return out
}

// link signs a portal link of the tenant's consumer uid, as the API does.
func (w portalWorld) link(t *testing.T, tenantID uuid.UUID, uid string, ttl time.Duration, readOnly bool) string {
	t.Helper()
	return portalLink(t, w.store, dashboardKey, w.url, tenantID, uid, ttl, readOnly).URL
}

// portalLink signs a link to the portal of the tenant's consumer uid with
// key, under publicURL, expiring ttl from now (in the past, for a
// negative ttl: the link is made by a clock an hour before its expiry).
func portalLink(t *testing.T, st *store.Store, key []byte, publicURL string, tenantID uuid.UUID, uid string, ttl time.Duration, readOnly bool) sluice.PortalLink {
	t.Helper()
	made := time.Now().Add(ttl - time.Hour)
	ctl := control.New(control.Config{Store: st, PortalKey: key, PublicURL: publicURL, Now: func() time.Time { return made }})
	who := control.Caller{Tenant: tenantID, Actor: sluice.Actor{Type: sluice.ActorAPIKey, ID: "test", Name: "test"}, Role: sluice.RoleOwner}
	hour := int64(time.Hour / time.Second)
	l, err := ctl.CreatePortalLink(context.Background(), who, uid, control.PortalLinkInput{TTLSeconds: &hour, ReadOnly: readOnly})
	require.NoError(t, err)
	return l
}

// openPortal follows a portal link and requires it to sign in.
func (br *browser) openPortal(link string) {
	t := br.b.t
	t.Helper()
	p := br.get(strings.TrimPrefix(link, br.b.srv.URL))
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/", p.Location(), "the token leaves the address bar")
	require.NotEmpty(t, br.sessionCookie())
}

func TestPortalSignIn(t *testing.T) {
	b := setup(t)
	w := b.portalWorld()
	br := b.browser()
	link := w.link(t, b.tenantA.ID, "c1", time.Hour, false)
	require.True(t, strings.HasPrefix(link, b.srv.URL+"/portal?token="), link)

	p := br.get(strings.TrimPrefix(link, b.srv.URL))
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/", p.Location())
	cookies := (&http.Response{Header: p.Header}).Cookies()
	require.Len(t, cookies, 1)
	require.True(t, cookies[0].HttpOnly)
	require.InDelta(t, time.Hour.Seconds(), cookies[0].MaxAge, 5, "the session lasts as long as the link")

	p = br.get("/")
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, "Acme · Consumer c1", w.c1.endpoint.URL, "Sign out")
	require.NotContains(t, p.Body, w.c2.endpoint.URL)
	require.NotContains(t, p.Body, w.own.endpoint.URL)
	require.NotContains(t, p.Body, `href="/api-keys"`)
	require.NotContains(t, p.Body, `href="/consumers"`)

	// A second link replaces the session the browser had.
	first := br.sessionCookie()
	br.openPortal(w.link(t, b.tenantA.ID, "c2", time.Hour, false))
	require.NotEqual(t, first, br.sessionCookie())
	p = br.get("/")
	requireContains(t, p, w.c2.endpoint.URL)
	require.NotContains(t, p.Body, w.c1.endpoint.URL)
	old := b.browser()
	old.setSessionCookie(first)
	require.Equal(t, http.StatusSeeOther, old.get("/").Status, "the replaced session ended")
}

func TestPortalInvalidLinks(t *testing.T) {
	b := setup(t)
	w := b.portalWorld()
	good := w.link(t, b.tenantA.ID, "c1", time.Hour, false)
	token := strings.TrimPrefix(good, b.srv.URL+"/portal?token=")
	tampered := token[:len(token)-2] + "AA"
	if tampered == token {
		tampered = token[:len(token)-2] + "BB"
	}
	expired := w.link(t, b.tenantA.ID, "c1", -time.Minute, false)
	revoked := w.link(t, b.tenantA.ID, "c2", time.Hour, false)
	require.NoError(t, b.store.RevokePortal(context.Background(), b.tenantA.ID, "c2"))
	forged := portalLink(t, b.store, []byte("some other key"), b.srv.URL, b.tenantA.ID, "c1", time.Hour, false)

	for name, path := range map[string]string{
		"no token":  "/portal",
		"empty":     "/portal?token=",
		"garbage":   "/portal?token=not-a-token",
		"tampered":  "/portal?token=" + tampered,
		"truncated": "/portal?token=" + token[:20],
		"expired":   strings.TrimPrefix(expired, b.srv.URL),
		"revoked":   strings.TrimPrefix(revoked, b.srv.URL),
		"forged":    strings.TrimPrefix(forged.URL, b.srv.URL),
	} {
		br := b.browser()
		p := br.get(path)
		require.Equal(t, http.StatusForbidden, p.Status, name)
		requireContains(t, p, "Portal link not valid", "Ask for a new link")
		require.Empty(t, br.sessionCookie(), name)
	}

	// The consumer is deleted: its links die with it.
	require.NoError(t, store.ExecRows(context.Background(), b.store, (*dbq.Queries).DeleteConsumer, dbq.DeleteConsumerParams{TenantID: b.tenantA.ID, Uid: "c1"}))
	p := b.browser().get(strings.TrimPrefix(good, b.srv.URL))
	require.Equal(t, http.StatusForbidden, p.Status)
}

func TestPortalRevocationSignsOut(t *testing.T) {
	b := setup(t)
	w := b.portalWorld()
	br := b.browser()
	br.openPortal(w.link(t, b.tenantA.ID, "c1", time.Hour, false))
	ro := b.browser()
	ro.openPortal(w.link(t, b.tenantA.ID, "c1", time.Hour, true))
	other := b.browser()
	other.openPortal(w.link(t, b.tenantA.ID, "c2", time.Hour, false))

	require.NoError(t, b.store.RevokePortal(context.Background(), b.tenantA.ID, "c1"))
	for _, x := range []*browser{br, ro} {
		p := x.get("/endpoints/" + w.c1.endpoint.ID.String())
		require.Equal(t, http.StatusSeeOther, p.Status)
		require.True(t, strings.HasPrefix(p.Location(), "/login"), p.Location())
	}
	require.Equal(t, http.StatusOK, other.get("/").Status, "another consumer's session goes on")
}

// TestPortalScope checks every page and action of a portal session against
// the ids of another consumer and of the tenant's own: each answers 404,
// exactly like an id that does not exist, and changes nothing.
func TestPortalScope(t *testing.T) {
	b := setup(t)
	w := b.portalWorld()
	br := b.browser()
	br.openPortal(w.link(t, b.tenantA.ID, "c1", time.Hour, false))
	token := br.csrf("/")

	unknown := seeded{endpoint: sluice.Endpoint{ID: uuid.New()}, delivery: sluice.Delivery{ID: uuid.New()}, event: sluice.Event{ID: uuid.New()}}
	for name, s := range map[string]seeded{"other consumer": w.c2, "tenant's own": w.own, "unknown": unknown} {
		for _, path := range scopedGets(s) {
			p := br.get(path)
			require.Equal(t, http.StatusNotFound, p.Status, "%s: GET %s", name, path)
			requireContains(t, p, "There is nothing here")
			if s.endpoint.URL != "" {
				require.NotContains(t, p.Body, s.endpoint.URL, "%s: GET %s", name, path)
			}
		}
		for path, form := range scopedPosts(s) {
			form.Set("csrf_token", token)
			p := br.post(path, form)
			require.Equal(t, http.StatusNotFound, p.Status, "%s: POST %s: %s", name, path, p.Body)
		}
	}
	requireNoReplays(t, b, w.c2, w.own)

	// The tenant's own pages are not there at all.
	for _, path := range []string{"/api-keys", "/consumers", "/consumers/c1", "/api-keys/" + uuid.NewString() + "/revoke"} {
		require.Equal(t, http.StatusNotFound, br.get(path).Status, path)
	}
	p := br.post("/api-keys", url.Values{"name": {"sneaky"}, "csrf_token": {token}})
	require.Equal(t, http.StatusNotFound, p.Status)
	keys, err := b.store.ListAPIKeys(context.Background(), b.tenantA.ID, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, keys.Items, 1, "no key was made")

	// Its own objects are there.
	for _, path := range scopedGets(w.c1) {
		require.Equal(t, http.StatusOK, br.get(path).Status, path)
	}
	p = br.get("/dead")
	requireContains(t, p, w.c1.delivery.ID.String())
	require.NotContains(t, p.Body, w.c2.delivery.ID.String())
	require.NotContains(t, p.Body, w.own.delivery.ID.String())
	p = br.get("/events")
	requireContains(t, p, w.c1.event.ID.String(), w.broadcast.ID.String())
	require.NotContains(t, p.Body, w.c2.event.ID.String())
	require.NotContains(t, p.Body, w.own.event.ID.String())

	// A broadcast shows only the consumer's own share of its fan-out.
	p = br.get("/events/" + w.broadcast.ID.String())
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, w.c1.endpoint.URL)
	require.NotContains(t, p.Body, w.c2.endpoint.URL)
	require.NotContains(t, p.Body, w.own.endpoint.URL)
	fanout, err := b.store.ListDeliveries(context.Background(), b.tenantA.ID,
		sluice.DeliveryFilter{EventID: &w.broadcast.ID}, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, fanout.Items, 3, "the broadcast did reach all three")

	// And its actions work.
	p = br.post("/deliveries/"+w.c1.delivery.ID.String()+"/replay", url.Values{"csrf_token": {token}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
}

// scopedGets are the pages about one seeded endpoint, delivery and event.
func scopedGets(s seeded) []string {
	ep, del, ev := s.endpoint.ID.String(), s.delivery.ID.String(), s.event.ID.String()
	return []string{
		"/endpoints/" + ep,
		"/endpoints/" + ep + "?status=dead",
		"/endpoints/" + ep + "/replay?status=dead&from=endpoint",
		"/endpoints/" + ep + "/edit",
		"/endpoints/" + ep + "/delete",
		"/endpoints/" + ep + "/secret/rotate",
		"/deliveries/" + del,
		"/events/" + ev,
		"/dead?endpoint_id=" + ep,
	}
}

// scopedPosts are the actions on one seeded endpoint and delivery.
func scopedPosts(s seeded) map[string]url.Values {
	ep, del := s.endpoint.ID.String(), s.delivery.ID.String()
	return map[string]url.Values{
		"/endpoints/" + ep + "/replay":        {"status": {"dead"}, "from": {"endpoint"}, "confirm": {"yes"}},
		"/deliveries/" + del + "/replay":      {},
		"/deliveries/" + del + "/retry":       {},
		"/endpoints/" + ep + "/edit":          {"url": {"https://moved.test/x"}, "max_in_flight": {"5"}},
		"/endpoints/" + ep + "/disable":       {"disabled": {"1"}},
		"/endpoints/" + ep + "/secret":        {},
		"/endpoints/" + ep + "/secret/rotate": {"confirm": {"yes"}},
		"/endpoints/" + ep + "/test":          {},
		"/endpoints/" + ep + "/circuit/close": {},
		"/endpoints/" + ep + "/throttle/lift": {},
		"/endpoints/" + ep + "/delete":        {"confirm": {"yes"}},
	}
}

// requireNoReplays checks that the seeded deliveries were neither replayed
// nor retried: their endpoints hold no replay, and they are still dead.
func requireNoReplays(t *testing.T, b *bundle, ss ...seeded) {
	t.Helper()
	for _, s := range ss {
		page, err := b.store.ListDeliveries(context.Background(), b.tenantA.ID,
			sluice.DeliveryFilter{EndpointID: &s.endpoint.ID}, sluice.PageParams{Limit: 10})
		require.NoError(t, err)
		require.Len(t, page.Items, 2, "endpoint %s: its own event's delivery and the broadcast's", s.endpoint.URL)
		for _, d := range page.Items {
			require.Nil(t, d.ReplayedFrom, "endpoint %s", s.endpoint.URL)
		}
		del, _, err := b.store.GetDelivery(context.Background(), b.tenantA.ID, s.delivery.ID)
		require.NoError(t, err)
		require.Equal(t, sluice.DeliveryDead, del.Status)
		ep, err := b.store.GetEndpoint(context.Background(), b.tenantA.ID, s.endpoint.ID)
		require.NoError(t, err, "not deleted")
		require.Equal(t, s.endpoint.URL, ep.URL, "not edited")
		require.False(t, ep.Disabled, "not disabled")
		secret, err := b.store.EndpointSecret(context.Background(), b.tenantA.ID, s.endpoint.ID)
		require.NoError(t, err)
		require.Equal(t, s.secret, secret, "not rotated")
	}
}

// TestPortalReadOnly: a read-only link's pages hold no form at all, and
// every POST answers 403, however well-formed.
func TestPortalReadOnly(t *testing.T) {
	b := setup(t)
	w := b.portalWorld()
	br := b.browser()
	br.openPortal(w.link(t, b.tenantA.ID, "c1", time.Hour, true))

	for _, path := range append(scopedGets(w.c1)[:2], "/", "/dead", "/events", "/events?type=order.created",
		"/deliveries/"+w.c1.delivery.ID.String(), "/events/"+w.c1.event.ID.String(), "/events/"+w.broadcast.ID.String(), "/no-such-page") {
		p := br.get(path)
		require.Contains(t, []int{http.StatusOK, http.StatusNotFound}, p.Status, path)
		require.NotContains(t, p.Body, "<form", "GET %s shows a form", path)
	}
	requireContains(t, br.get("/"), "read-only", w.c1.endpoint.URL)
	requireContains(t, br.get("/dead"), w.c1.delivery.ID.String())

	// The confirmation page, and every change, is refused as read-only
	// (not as a bad CSRF token: the guard comes first).
	p := br.get("/endpoints/" + w.c1.endpoint.ID.String() + "/replay?status=dead&from=endpoint")
	require.Equal(t, http.StatusForbidden, p.Status)
	requireContains(t, p, "read-only")
	for path, form := range scopedPosts(w.c1) {
		p := br.post(path, form)
		require.Equal(t, http.StatusForbidden, p.Status, "POST %s", path)
		requireContains(t, p, "read-only")
	}
	requireNoReplays(t, b, w.c1)
}

// TestPortalTenantSeesConsumers: a tenant's session lists its consumers and
// opens any consumer's view; another tenant's consumer is not found.
func TestPortalTenantSeesConsumers(t *testing.T) {
	b := setup(t)
	w := b.portalWorld()
	br := b.browser()
	br.login(b.keyA)

	p := br.get("/consumers")
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, `href="/consumers/c1"`, `href="/consumers/c2"`, "Consumer c1")
	p = br.get("/consumers/c1")
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, w.c1.endpoint.URL)
	require.NotContains(t, p.Body, w.c2.endpoint.URL)
	require.NotContains(t, p.Body, w.own.endpoint.URL)
	for _, path := range []string{"/consumers/nobody", "/consumers/bad%20uid"} {
		require.Equal(t, http.StatusNotFound, br.get(path).Status, path)
	}
	// The tenant sees every endpoint, each marked with its consumer.
	p = br.get("/")
	requireContains(t, p, w.c1.endpoint.URL, w.c2.endpoint.URL, w.own.endpoint.URL, `href="/consumers/c2"`)

	other := b.browser()
	other.login(b.keyB)
	require.Equal(t, http.StatusNotFound, other.get("/consumers/c1").Status)
	// Not "c1" alone: the page's random CSRF token may contain it.
	require.NotContains(t, other.get("/consumers").Body, `href="/consumers/c1"`)
}

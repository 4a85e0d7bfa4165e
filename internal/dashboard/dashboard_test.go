package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/dashboard"
	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/flow"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
	"github.com/sluice-dev/sluice/internal/testkit/dispatchtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

func TestLogin(t *testing.T) {
	b := setup(t)
	br := b.browser()

	p := br.get("/login")
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, `name="api_key"`, `action="/login"`)

	p = br.post("/login", url.Values{"api_key": {"sk_not_a_real_key"}})
	require.Equal(t, http.StatusUnauthorized, p.Status)
	requireContains(t, p, "not valid")
	require.Empty(t, p.Header.Values("Set-Cookie"))
	require.Empty(t, br.sessionCookie())

	p = br.post("/login", url.Values{"api_key": {"  "}})
	require.Equal(t, http.StatusBadRequest, p.Status)
	require.Empty(t, br.sessionCookie())

	p = br.post("/login", url.Values{"api_key": {" " + b.keyA + "\n"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/", p.Location())
	cookies := (&http.Response{Header: p.Header}).Cookies()
	require.Len(t, cookies, 1)
	c := cookies[0]
	require.Equal(t, dashboard.SessionCookie, c.Name)
	require.True(t, c.HttpOnly, "session cookie must be HttpOnly")
	require.Equal(t, http.SameSiteLaxMode, c.SameSite)
	require.Equal(t, "/", c.Path)
	require.False(t, c.Secure, "plain http: not Secure")
	require.InDelta(t, dashboard.SessionTTL.Seconds(), c.MaxAge, 5)
	require.NotContains(t, c.Value, b.keyA, "the cookie must not hold the API key")

	p = br.get("/")
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, "Acme", "Sign out")

	// Signed in, /login moves on.
	p = br.get("/login")
	require.Equal(t, http.StatusSeeOther, p.Status)

	// X-Forwarded-Proto from a client that is no trusted proxy is not
	// believed.
	p = b.browser().post("/login", url.Values{"api_key": {b.keyA}}, "X-Forwarded-Proto", "https")
	require.Equal(t, http.StatusSeeOther, p.Status)
	cookies = (&http.Response{Header: p.Header}).Cookies()
	require.Len(t, cookies, 1)
	require.False(t, cookies[0].Secure, "X-Forwarded-Proto from an untrusted peer")
}

// TestLoginBehindTrustedProxy: behind a TLS-terminating proxy that is
// trusted (SLUICE_TRUSTED_PROXIES), the cookie is Secure when the proxy
// says https, and not when it says http.
func TestLoginBehindTrustedProxy(t *testing.T) {
	b := setupWith(t, func(b *bundle) http.Handler {
		d := dashboard.New(controltest.New(b.store, controltest.Options{PortalKey: dashboardKey, Nudger: b.nudger, Now: b.now}),
			dashboard.Config{Key: dashboardKey, Now: b.now, Limits: looseLimits(b.store)})
		return apirate.TrustProxies([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}, d.Handler())
	})
	for proto, secure := range map[string]bool{"https": true, "http": false} {
		p := b.browser().post("/login", url.Values{"api_key": {b.keyA}},
			"X-Forwarded-For", "203.0.113.9", "X-Forwarded-Proto", proto)
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		cookies := (&http.Response{Header: p.Header}).Cookies()
		require.Len(t, cookies, 1)
		require.Equal(t, secure, cookies[0].Secure, proto)
	}
}

func TestLoginRedirectsBackToPage(t *testing.T) {
	b := setup(t)
	s := b.seed(b.tenantA, "https://hooks.acme.test/a", false)
	br := b.browser()
	path := "/endpoints/" + s.endpoint.ID.String()
	p := br.get(path)
	require.Equal(t, http.StatusSeeOther, p.Status)
	loc, err := url.Parse(p.Location())
	require.NoError(t, err)
	require.Equal(t, "/login", loc.Path)
	require.Equal(t, path, loc.Query().Get("next"))

	p = br.get(p.Location())
	requireContains(t, p, `name="next" value="`+path+`"`)
	p = br.post("/login", url.Values{"api_key": {b.keyA}, "next": {path}})
	require.Equal(t, http.StatusSeeOther, p.Status)
	require.Equal(t, path, p.Location())

	// Only paths of this site.
	for _, next := range []string{"https://evil.test/", "//evil.test/x", `/\evil.test`, "javascript:alert(1)"} {
		p = b.browser().post("/login", url.Values{"api_key": {b.keyA}, "next": {next}})
		require.Equal(t, http.StatusSeeOther, p.Status)
		require.Equal(t, "/", p.Location(), "next=%s", next)
	}
}

func TestPagesRequireSession(t *testing.T) {
	b := setup(t)
	s := b.seed(b.tenantA, "https://hooks.acme.test/a", true)
	br := b.browser()
	pages := []string{
		"/", "/dead", "/events",
		"/endpoints/" + s.endpoint.ID.String(),
		"/deliveries/" + s.delivery.ID.String(),
		"/events/" + s.event.ID.String(),
	}
	for _, path := range pages {
		p := br.get(path)
		require.Equal(t, http.StatusSeeOther, p.Status, path)
		require.True(t, strings.HasPrefix(p.Location(), "/login"), "%s redirects to %s", path, p.Location())
		require.NotContains(t, p.Body, s.endpoint.URL)
	}
	for _, path := range []string{
		"/deliveries/" + s.delivery.ID.String() + "/replay",
		"/endpoints/" + s.endpoint.ID.String() + "/replay",
	} {
		p := br.post(path, url.Values{"csrf_token": {"x"}})
		require.Equal(t, http.StatusForbidden, p.Status, path)
	}
	requireReplays(t, b, s, 0)
}

func TestForgedCookiesAreRefused(t *testing.T) {
	b := setup(t)
	b.seed(b.tenantA, "https://hooks.acme.test/a", false)
	sB := b.seed(b.tenantB, "https://hooks.globex.test/b", false)
	br := b.browser()
	br.login(b.keyA)
	good := br.sessionCookie()
	require.NotEmpty(t, good)
	require.Equal(t, http.StatusOK, br.get("/").Status)

	// The cookie is a random token the server looks up: a changed
	// character, a cut one, garbage, or a cookie of the old signed format
	// names no session.
	flipped := []byte(good)
	flipped[3] = 'A'
	if good[3] == 'A' {
		flipped[3] = 'B'
	}
	signed := "v1." + b.tenantB.ID.String() + ".99999999999.bm9uY2U.c2lnbmF0dXJl"
	for name, forged := range map[string]string{
		"changed character": string(flipped), "cut": good[:len(good)-1], "garbage": "v1.hello",
		"old signed format": signed, "empty": "",
	} {
		fb := b.browser()
		fb.setSessionCookie(forged)
		p := fb.get("/")
		require.Equal(t, http.StatusSeeOther, p.Status, name)
		require.True(t, strings.HasPrefix(p.Location(), "/login"), name)
		require.NotContains(t, p.Body, sB.endpoint.URL, name)
		p = fb.get("/endpoints/" + sB.endpoint.ID.String())
		require.Equal(t, http.StatusSeeOther, p.Status, name)
	}
}

func TestCSRF(t *testing.T) {
	b := setup(t)
	s := b.seed(b.tenantA, "https://hooks.acme.test/a", true)
	br := b.browser()
	br.login(b.keyA)
	token := br.csrf("/")
	replay := "/deliveries/" + s.delivery.ID.String() + "/replay"
	replayAll := "/endpoints/" + s.endpoint.ID.String() + "/replay"

	// Another sign-in of the same tenant has another token.
	other := b.browser()
	other.login(b.keyA)
	otherToken := other.csrf("/")
	require.NotEqual(t, token, otherToken)

	for _, path := range []string{replay, replayAll, "/logout"} {
		for name, form := range map[string]url.Values{
			"no token":            {"status": {"dead"}},
			"empty token":         {"csrf_token": {""}},
			"wrong token":         {"csrf_token": {"AAAA" + token[4:]}},
			"other session token": {"csrf_token": {otherToken}},
		} {
			p := br.post(path, form)
			require.Equal(t, http.StatusForbidden, p.Status, "%s with %s", path, name)
		}
	}
	requireReplays(t, b, s, 0)
	require.Equal(t, http.StatusOK, br.get("/").Status, "refused logout must not sign out")

	// A cross-site post is refused even with the right token.
	p := br.post(replay, url.Values{"csrf_token": {token}}, "Sec-Fetch-Site", "cross-site")
	require.Equal(t, http.StatusForbidden, p.Status)
	p = br.post(replay, url.Values{"csrf_token": {token}}, "Origin", "https://evil.test")
	require.Equal(t, http.StatusForbidden, p.Status)
	requireReplays(t, b, s, 0)

	// Same-site with the token works.
	p = br.post(replay, url.Values{"csrf_token": {token}}, "Sec-Fetch-Site", "same-origin")
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	requireReplays(t, b, s, 1)

	// Logout with the token ends the session.
	p = br.post("/logout", url.Values{"csrf_token": {token}})
	require.Equal(t, http.StatusSeeOther, p.Status)
	require.Equal(t, "/login", p.Location())
	require.Empty(t, br.sessionCookie())
	require.Equal(t, http.StatusSeeOther, br.get("/").Status)
}

func TestOtherTenantsObjectsAreNotFound(t *testing.T) {
	b := setup(t)
	sA := b.seed(b.tenantA, "https://hooks.acme.test/a", true)
	sB := b.seed(b.tenantB, "https://hooks.globex.test/b", true)
	br := b.browser()
	br.login(b.keyA)
	token := br.csrf("/")

	// A's own pages work.
	for _, path := range []string{
		"/endpoints/" + sA.endpoint.ID.String(),
		"/deliveries/" + sA.delivery.ID.String(),
		"/events/" + sA.event.ID.String(),
	} {
		require.Equal(t, http.StatusOK, br.get(path).Status, path)
	}
	for _, path := range []string{
		"/endpoints/" + sB.endpoint.ID.String(),
		"/deliveries/" + sB.delivery.ID.String(),
		"/events/" + sB.event.ID.String(),
		"/dead?endpoint_id=" + sB.endpoint.ID.String(),
		"/endpoints/" + uuid.NewString(),
		"/deliveries/" + uuid.NewString(),
		"/events/" + uuid.NewString(),
		"/endpoints/not-a-uuid",
		"/deliveries/123",
		"/events/%27%3B--",
		"/dead?endpoint_id=nope",
		"/no/such/page",
	} {
		p := br.get(path)
		require.Equal(t, http.StatusNotFound, p.Status, path)
		require.Contains(t, p.Header.Get("Content-Type"), "text/html", path)
		requireContains(t, p, "Not found")
		require.NotContains(t, p.Body, sB.endpoint.URL, path)
	}
	for _, path := range []string{
		"/deliveries/" + sB.delivery.ID.String() + "/replay",
		"/endpoints/" + sB.endpoint.ID.String() + "/replay",
		"/deliveries/bogus/replay",
	} {
		p := br.post(path, url.Values{"csrf_token": {token}, "status": {"dead"}})
		require.Equal(t, http.StatusNotFound, p.Status, path)
	}
	requireReplays(t, b, sB, 0)

	// Lists show only A's objects.
	for _, path := range []string{"/", "/dead", "/events"} {
		p := br.get(path)
		require.Equal(t, http.StatusOK, p.Status, path)
		require.NotContains(t, p.Body, sB.endpoint.URL, path)
		require.NotContains(t, p.Body, sB.delivery.ID.String(), path)
		require.NotContains(t, p.Body, sB.event.ID.String(), path)
	}
}

// requireReplays checks how many replays of s's delivery exist.
func requireReplays(t *testing.T, b *bundle, s seeded, n int) []sluice.Delivery {
	t.Helper()
	page, err := b.store.ListDeliveries(context.Background(), s.endpoint.TenantID,
		sluice.DeliveryFilter{EndpointID: &s.endpoint.ID}, sluice.PageParams{Limit: 100})
	require.NoError(t, err)
	var replays []sluice.Delivery
	for _, d := range page.Items {
		if d.ReplayedFrom != nil && *d.ReplayedFrom == s.delivery.ID {
			replays = append(replays, d)
		}
	}
	require.Len(t, replays, n)
	return replays
}

func TestReplayOne(t *testing.T) {
	b := setup(t)
	s := b.seed(b.tenantA, "https://hooks.acme.test/a", true)
	br := b.browser()
	br.login(b.keyA)
	path := "/deliveries/" + s.delivery.ID.String()
	token := br.csrf(path)

	p := br.post(path+"/replay", url.Values{"csrf_token": {token}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	replays := requireReplays(t, b, s, 1)
	r := replays[0]
	require.Equal(t, sluice.DeliveryPending, r.Status)
	require.Equal(t, s.event.ID, r.EventID)
	require.Equal(t, "/deliveries/"+r.ID.String()+"?replayed=1", p.Location())

	p = br.get(p.Location())
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, "Replay queued", r.ID.String(), `href="/deliveries/`+s.delivery.ID.String()+`"`, "badge-pending")
}

func TestReplayAllMatching(t *testing.T) {
	b := setup(t)
	s := b.seed(b.tenantA, "https://hooks.acme.test/a", false)
	b.event(b.tenantA, "order.updated", `{"n":2}`)
	b.event(b.tenantA, "order.updated", `{"n":3}`)
	b.kill(s.endpoint.ID, 503, "unavailable", "try later")
	other := b.seed(b.tenantA, "https://hooks.acme.test/other", true)

	br := b.browser()
	br.login(b.keyA)
	p := br.get("/dead")
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, "Replay all matching", s.endpoint.URL, other.endpoint.URL,
		replayAllHref(s.endpoint.ID, "dead"), replayAllHref(other.endpoint.ID, "dead"), "Replay all 3 dead deliveries")
	require.Equal(t, 4, strings.Count(p.Body, `class="badge badge-dead"`), "four dead deliveries listed")
	token := br.csrf("/dead")

	// "Replay all" is confirmed first: the link leads to a page saying
	// what will be queued, and an unconfirmed POST lands there too.
	p = br.get("/endpoints/" + s.endpoint.ID.String() + "/replay?status=dead&from=dead")
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireContains(t, p, "3 new deliveries", `name="confirm" value="yes"`, s.endpoint.URL)
	p = br.post("/endpoints/"+s.endpoint.ID.String()+"/replay", url.Values{"csrf_token": {token}, "status": {"dead"}, "from": {"dead"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/endpoints/"+s.endpoint.ID.String()+"/replay?from=dead&status=dead", p.Location())
	requireReplays(t, b, other, 0)

	p = br.post("/endpoints/"+s.endpoint.ID.String()+"/replay", url.Values{"csrf_token": {token}, "status": {"dead"}, "from": {"dead"}, "confirm": {"yes"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/dead?endpoint_id="+s.endpoint.ID.String()+"&queued=3", p.Location())
	p = br.get(p.Location())
	requireContains(t, p, "Queued 3 replays.")
	require.NotContains(t, p.Body, replayAllHref(other.endpoint.ID, "dead"), "filtered to one endpoint")
	require.NotContains(t, p.Body, "Replay all matching", "nothing left to replay: each event has a replay queued")
	require.Equal(t, 3, strings.Count(p.Body, `class="badge badge-dead"`), "the endpoint's three dead deliveries")
	require.Equal(t, 3, strings.Count(p.Body, `replayed as`), "each marked with its replay")

	pending := sluice.DeliveryPending
	page, err := b.store.ListDeliveries(context.Background(), b.tenantA.ID,
		sluice.DeliveryFilter{EndpointID: &s.endpoint.ID, Status: &pending}, sluice.PageParams{Limit: 100})
	require.NoError(t, err)
	replays := 0
	for _, d := range page.Items {
		if d.ReplayedFrom != nil {
			replays++
		}
	}
	require.Equal(t, 3, replays, "one replay per dead delivery")
	requireReplays(t, b, other, 0)

	// From the endpoint page, back to the endpoint page.
	requireContains(t, br.get("/endpoints/"+other.endpoint.ID.String()), replayAllHref(other.endpoint.ID, "endpoint"))
	p = br.post("/endpoints/"+other.endpoint.ID.String()+"/replay", url.Values{"csrf_token": {token}, "from": {"endpoint"}, "confirm": {"yes"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/endpoints/"+other.endpoint.ID.String()+"?queued=1", p.Location())
	p = br.get(p.Location())
	requireContains(t, p, "Queued 1 replay.")
	require.NotContains(t, p.Body, replayAllHref(other.endpoint.ID, "endpoint"), "hidden with nothing to replay")
	requireReplays(t, b, other, 1)
	p = br.post("/endpoints/"+other.endpoint.ID.String()+"/replay", url.Values{"csrf_token": {token}, "from": {"endpoint"}, "confirm": {"yes"}})
	require.Equal(t, "/endpoints/"+other.endpoint.ID.String()+"?queued=0", p.Location(), "a second call queues nothing")
	requireReplays(t, b, other, 1)

	p = br.post("/endpoints/"+other.endpoint.ID.String()+"/replay", url.Values{"csrf_token": {token}, "status": {"pending"}})
	require.Equal(t, http.StatusBadRequest, p.Status)
	p = br.post("/endpoints/"+other.endpoint.ID.String()+"/replay", url.Values{"csrf_token": {token}, "since": {"yesterday"}})
	require.Equal(t, http.StatusBadRequest, p.Status)
}

// replayAllHref is the "Replay all" link to an endpoint's confirmation page.
func replayAllHref(id uuid.UUID, from string) string {
	return `href="/endpoints/` + id.String() + `/replay?from=` + from + `&amp;status=dead"`
}

func TestPagesShowState(t *testing.T) {
	b := setup(t)
	s := b.seed(b.tenantA, "https://hooks.acme.test/orders?x=<b>", true)
	br := b.browser()
	br.login(b.keyA)

	p := br.get("/")
	require.Equal(t, http.StatusOK, p.Status)
	require.Equal(t, "text/html; charset=utf-8", p.Header.Get("Content-Type"))
	require.Equal(t, "no-store", p.Header.Get("Cache-Control"))
	require.Contains(t, p.Header.Get("Content-Security-Policy"), "default-src 'none'")
	requireContains(t, p, "https://hooks.acme.test/orders?x=&lt;b&gt;", "badge-active", "5/s, burst 10", "badge-closed",
		`href="/endpoints/`+s.endpoint.ID.String()+`"`, "/static/style.css")
	require.NotContains(t, p.Body, "<b>", "URLs are escaped")
	require.NotContains(t, p.Body, "<script", "no JavaScript")

	p = br.get("/endpoints/" + s.endpoint.ID.String())
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, s.endpoint.ID.String(), "orders", "badge-dead", "order.created",
		`href="/deliveries/`+s.delivery.ID.String()+`"`, "Replay all 1 dead delivery", "UTC")
	p = br.get("/endpoints/" + s.endpoint.ID.String() + "?status=delivered")
	requireContains(t, p, "No deliveries.")
	require.Equal(t, http.StatusBadRequest, br.get("/endpoints/"+s.endpoint.ID.String()+"?status=weird").Status)

	p = br.get("/deliveries/" + s.delivery.ID.String())
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, "HTTP 500", "boom", "12 ms", "<pre>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; server exploded</pre>",
		`action="/deliveries/`+s.delivery.ID.String()+`/replay"`, `name="csrf_token"`, s.endpoint.URL[:24])
	require.NotContains(t, p.Body, "<script")

	p = br.get("/events")
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, "order.created", `href="/events/`+s.event.ID.String()+`"`)
	require.NotContains(t, p.Body, "badge-sluice", "the tenant's own events are not marked")
	b.updateEndpoint(b.tenantA, s.endpoint.ID, control.EndpointInput{Disabled: new(true)})
	requireContains(t, br.get("/events"), "sluice.endpoint.disabled", `class="badge badge-sluice"`)
	p = br.get("/events?type=nothing.here")
	requireContains(t, p, "No events.")

	p = br.get("/events/" + s.event.ID.String())
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, "{\n  &#34;order&#34;: {\n    &#34;id&#34;: 42,", // pretty-printed
		`href="/deliveries/`+s.delivery.ID.String()+`"`, "Fan-out")

	res, err := http.Get(b.srv.URL + "/static/style.css")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, res.Header.Get("Content-Type"), "text/css")
	require.Equal(t, http.StatusNotFound, br.get("/static/").Status)
}

func TestPagination(t *testing.T) {
	b := setup(t)
	s := b.seed(b.tenantA, "https://hooks.acme.test/a", false)
	for i := range 55 {
		b.event(b.tenantA, "tick", fmt.Sprintf(`{"i":%d}`, i))
	}
	br := b.browser()
	br.login(b.keyA)
	for _, base := range []string{"/events", "/endpoints/" + s.endpoint.ID.String()} {
		p := br.get(base)
		require.Equal(t, http.StatusOK, p.Status)
		m := olderRe.FindStringSubmatch(p.Body)
		require.NotNil(t, m, "%s has an Older link", base)
		next := strings.ReplaceAll(m[1], "&amp;", "&")
		require.True(t, strings.HasPrefix(next, base+"?cursor="), next)
		p2 := br.get(next)
		require.Equal(t, http.StatusOK, p2.Status)
		require.Nil(t, olderRe.FindStringSubmatch(p2.Body), "%s has two pages", base)
		rows := strings.Count(p.Body, "<tr>") + strings.Count(p2.Body, "<tr>") - 2 // minus header rows
		require.Equal(t, 56, rows, base)
	}
	require.Equal(t, http.StatusBadRequest, br.get("/events?cursor=zzz").Status)
}

var olderRe = regexp.MustCompile(`<a rel="next" href="([^"]+)">Older`)

func TestEndpointsShowFlowState(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	open := b.seed(b.tenantA, "https://hooks.acme.test/down", false)
	throttled := b.seed(b.tenantA, "https://hooks.acme.test/slow", false)
	disabled, err := b.store.CreateEndpoint(ctx, b.tenantA.ID, sluice.EndpointSettings{URL: "https://hooks.acme.test/off", MaxInFlight: 3, Disabled: true}, storetest.Secret)
	require.NoError(t, err)

	openedAt := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	probe := openedAt.Add(time.Minute)
	dispatchtest.SetFlow(t, b.store, open.endpoint.ID, func(f *dispatch.Flow) {
		f.Breaker = flow.Breaker{State: sluice.CircuitOpen, Failures: 7, OpenedAt: &openedAt, NextProbeAt: &probe,
			ProbeInterval: time.Minute, LastError: "HTTP 500"}
	})
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	dispatchtest.SetFlow(t, b.store, throttled.endpoint.ID, func(f *dispatch.Flow) {
		f.Throttle = flow.Throttle{Until: until, Reason: "429 with Retry-After: 3600", Count: 1}
	})

	br := b.browser()
	br.login(b.keyA)
	p := br.get("/")
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p,
		`badge badge-circuit_open" title="circuit_open">Circuit open`, `badge badge-open" title="open">Open`, "7 consecutive failures, probes included",
		"next probe <time datetime=\"2030-01-02T03:05:05Z\">2030-01-02 03:05:05 UTC</time>",
		`badge badge-throttled" title="throttled">Throttled`, "until <time datetime=\""+until.Format(time.RFC3339)+"\">", "429 with Retry-After: 3600",
		`badge badge-disabled" title="disabled">Disabled — by hand`, disabled.URL, "unlimited",
	)

	require.Equal(t, 1, strings.Count(p.Body, "probes included"), "only the open circuit says its count goes on")

	// An open circuit's count goes on past the threshold that opened it
	// (failed probes, requests in flight when it opened): its page says why.
	p = br.get("/endpoints/" + open.endpoint.ID.String())
	requireContains(t, p, "opened <time datetime=\"2030-01-02T03:04:05Z\">", "7 consecutive failures, probes included",
		`id="circuit-count">While the circuit is open, its failures go on counting: each failed probe, and each request already in flight when it opened, adds one.`)
	p = br.get("/endpoints/" + throttled.endpoint.ID.String())
	requireContains(t, p, "0 consecutive failures")
	require.NotContains(t, p.Body, "probes included")
	require.NotContains(t, p.Body, `id="circuit-count"`)
}

// TestReplayAllPastTheCap: an endpoint with more replayable dead
// deliveries than the count tells (sluice.ReplayCountCap) is offered
// "Replay all 1,000+", on the dead-letter page, the endpoint page and the
// confirmation, which says the count stops there; confirming queues every
// one.
func TestReplayAllPastTheCap(t *testing.T) {
	b := setup(t)
	s := b.seed(b.tenantA, "https://hooks.acme.test/many", true)
	const n = sluice.ReplayCountCap + 5
	storetest.DeadBacklog(t, b.store, b.tenantA.ID, s.endpoint.ID, n-1) // and the seeded one

	br := b.browser()
	br.login(b.keyA)
	requireContains(t, br.get("/dead"), "Replay all 1,000+ dead deliveries")
	requireContains(t, br.get("/endpoints/"+s.endpoint.ID.String()), "Replay all 1,000+ dead deliveries")
	p := br.get("/endpoints/" + s.endpoint.ID.String() + "/replay?status=dead&from=dead")
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireContains(t, p, "This queues 1,000+ new deliveries", "The count stops past 1,000; every one of them is queued.", "Queue 1,000+ replays")
	require.NotContains(t, p.Body, "1001 ", "the capped count is never shown as a number")

	token := br.csrf("/dead")
	p = br.post("/endpoints/"+s.endpoint.ID.String()+"/replay", url.Values{"csrf_token": {token}, "status": {"dead"}, "from": {"dead"}, "confirm": {"yes"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/dead?endpoint_id="+s.endpoint.ID.String()+"&queued="+strconv.Itoa(n), p.Location())
}

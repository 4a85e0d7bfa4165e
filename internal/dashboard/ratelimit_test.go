package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/dashboard"
	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
	"github.com/sluice-dev/sluice/internal/testkit/dispatchtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

func TestSignInLimitedPerAddress(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	h := dashboard.New(controltest.New(f.Store, controltest.Options{PortalKey: dashboardKey, Nudger: dispatchtest.Nudger(f.Store, f.Jobs)}), dashboard.Config{Key: dashboardKey}).Handler()
	signIn := func(addr, key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"api_key": {key}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = addr
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	for i := range 10 {
		require.Equal(t, http.StatusUnauthorized, signIn("198.51.100.7:4000", "sk_wrong").Code, "try %d", i)
	}
	require.Equal(t, http.StatusSeeOther, signIn("198.51.100.7:4001", f.KeyA).Code,
		"a good key signs in whatever its address has failed")
	w := signIn("198.51.100.7:4001", f.KeyB[:len(f.KeyB)-1]+"x")
	require.Equal(t, http.StatusTooManyRequests, w.Code, "the 11th failure in a minute")
	for range 40 { // past the failed look-ups too: unlooked
		require.Equal(t, http.StatusTooManyRequests, signIn("198.51.100.7:4001", "sk_wrong").Code)
	}
	require.Equal(t, http.StatusSeeOther, signIn("198.51.100.7:4001", f.KeyA).Code, "still signs in: found valid lately")
	retry, err := strconv.Atoi(w.Header().Get("Retry-After"))
	require.NoError(t, err)
	require.InDelta(t, 12, retry, 1, "one try every 6 s comes back, and the 11th failure was charged")
	require.Contains(t, w.Header().Get("Content-Type"), "text/html")
	require.Contains(t, w.Body.String(), "Too many failed sign-in attempts")

	// Another address, and another host's IPv6 /64, are not held back.
	require.Equal(t, http.StatusSeeOther, signIn("198.51.100.8:4000", f.KeyA).Code)
	for range 10 {
		signIn("[2001:db8:1:2::1]:4000", "sk_wrong")
	}
	require.Equal(t, http.StatusTooManyRequests, signIn("[2001:db8:1:2::ffff]:4000", "sk_wrong").Code, "one /64 is one client")
	require.Equal(t, http.StatusUnauthorized, signIn("[2001:db8:1:3::1]:4000", "sk_wrong").Code)

	// Good sign-ins cost the address nothing.
	for i := range 12 {
		require.Equal(t, http.StatusSeeOther, signIn("198.51.100.9:4000", f.KeyA).Code, "sign-in %d", i)
	}
}

// TestUnknownSessionsLimitedPerAddress: a session cookie that names no
// session is a failed authentication of its address, like a wrong key.
func TestUnknownSessionsLimitedPerAddress(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	h := dashboard.New(controltest.New(f.Store, controltest.Options{PortalKey: dashboardKey, Nudger: dispatchtest.Nudger(f.Store, f.Jobs)}), dashboard.Config{Key: dashboardKey}).Handler()
	get := func(addr string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/events", nil)
		req.AddCookie(&http.Cookie{Name: dashboard.SessionCookie, Value: strings.Repeat("A", 43)})
		req.RemoteAddr = addr
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	for i := range 10 {
		require.Equal(t, http.StatusSeeOther, get("198.51.100.7:4000").Code, "try %d: to the sign-in page", i)
	}
	w := get("198.51.100.7:4000")
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.NotEmpty(t, w.Header().Get("Retry-After"))
	require.Equal(t, http.StatusSeeOther, get("198.51.100.8:4000").Code, "another address")
}

// clock is the buckets' time, moved only by the test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// doors is a bundle serving the API and the dashboard on one router with
// one set of rate limits, as `sluice serve` does, on a clock that stands
// still unless the test moves it.
func doors(t *testing.T, cfg apirate.Config) (*bundle, *clock) {
	t.Helper()
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	b := setupWith(t, func(b *bundle) http.Handler {
		cfg.Rates, cfg.Now = b.store, c.now
		limits := apirate.New(cfg)
		r := chi.NewRouter()
		api := httpapi.New(controltest.New(b.store, controltest.Options{Nudger: b.nudger, AllowPrivateTargets: true}), httpapi.Config{Limits: limits})
		api.Mount(r)
		dashboard.New(controltest.New(b.store, controltest.Options{PortalKey: dashboardKey, Nudger: b.nudger}), dashboard.Config{Key: dashboardKey, Limits: limits}).Mount(r)
		return r
	})
	return b, c
}

// api sends an API request as key and returns the answer's status and
// headers.
func (b *bundle) api(key, method, path string) (int, http.Header) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, nil)
	require.NoError(b.t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	require.NoError(b.t, err)
	res.Body.Close()
	return res.StatusCode, res.Header
}

// remaining is what tenant key's bucket holds now, as the API says.
func (b *bundle) remaining(key string) int {
	b.t.Helper()
	status, h := b.api(key, http.MethodGet, "/v1/event-types")
	require.Equal(b.t, http.StatusOK, status)
	n, err := strconv.Atoi(h.Get("RateLimit-Remaining"))
	require.NoError(b.t, err)
	return n
}

// eventCount is how many events tenant has.
func (b *bundle) eventCount(tenant sluice.Tenant) int {
	b.t.Helper()
	page, err := b.store.ListEvents(context.Background(), tenant.ID, nil, nil, sluice.PageParams{Limit: sluice.MaxPageLimit})
	require.NoError(b.t, err)
	return len(page.Items)
}

// requireTooMany checks a 429 page: HTML, readable without scripts, with
// Retry-After.
func requireTooMany(t *testing.T, p page, says string) {
	t.Helper()
	require.Equal(t, http.StatusTooManyRequests, p.Status, p.Body)
	require.Contains(t, p.Header.Get("Content-Type"), "text/html")
	retry, err := strconv.Atoi(p.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, retry, 1)
	requireContains(t, p, "Too many requests", says)
	require.NotContains(t, p.Body, "<script")
}

// TestDoorsShareTheTenantBucket empties a tenant's bucket through the API;
// its dashboard and its consumers' portal are then refused too, writes and
// the chart page alike, and do nothing; another tenant is not.
func TestDoorsShareTheTenantBucket(t *testing.T) {
	b, c := doors(t, apirate.Config{Tenant: apirate.MustParse("10/s")}) // bursts of 20
	w := b.portalWorld()
	tenant := b.browser()
	tenant.login(b.keyA)
	tenantCSRF := tenant.csrf("/")
	customer := b.browser()
	customer.openPortal(w.link(t, b.tenantA.ID, "c1", time.Hour, false))
	customerCSRF := customer.csrf("/")

	// Each door's request costs its tenant tokens: the chart page five.
	before := b.remaining(b.keyA)
	require.Equal(t, http.StatusOK, tenant.get("/endpoints/"+w.own.endpoint.ID.String()).Status)
	require.Equal(t, http.StatusOK, customer.get("/").Status)
	require.Equal(t, before-1-5-1, b.remaining(b.keyA), "API, chart page, portal page, API")

	for {
		status, _ := b.api(b.keyA, http.MethodGet, "/v1/event-types")
		if status == http.StatusTooManyRequests {
			break
		}
		require.Equal(t, http.StatusOK, status)
	}
	events := b.eventCount(b.tenantA)
	requireTooMany(t, tenant.post("/endpoints/"+w.own.endpoint.ID.String()+"/test", url.Values{"csrf_token": {tenantCSRF}}), "rate limit")
	requireTooMany(t, tenant.get("/endpoints/"+w.own.endpoint.ID.String()), "rate limit")
	requireTooMany(t, customer.post("/endpoints/"+w.c1.endpoint.ID.String()+"/test", url.Values{"csrf_token": {customerCSRF}}), "rate limit")
	requireTooMany(t, customer.get("/"), "rate limit")
	require.Equal(t, events, b.eventCount(b.tenantA), "refused test events were not sent")

	// Another tenant draws from its own bucket.
	other := b.browser()
	other.login(b.keyB)
	require.Equal(t, http.StatusOK, other.get("/").Status)

	// A second of refill pays for the test event.
	c.advance(time.Second)
	p := tenant.post("/endpoints/"+w.own.endpoint.ID.String()+"/test", url.Values{"csrf_token": {tenantCSRF}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, events+1, b.eventCount(b.tenantA))
}

// TestSessionLimit: a session has a bucket of its own, smaller than its
// tenant's, and a consumer's portal sessions share one, so a portal link
// handed to a customer cannot empty its tenant's bucket.
func TestSessionLimit(t *testing.T) {
	b, c := doors(t, apirate.Config{Session: apirate.MustParse("1/s").WithBurst(10)})
	w := b.portalWorld()
	link := w.link(t, b.tenantA.ID, "c1", time.Hour, false)
	customer := b.browser()
	customer.openPortal(link) // one token
	before := b.remaining(b.keyA)
	for i := range 9 {
		require.Equal(t, http.StatusOK, customer.get("/").Status, "request %d", i)
	}
	requireTooMany(t, customer.get("/"), "This session")
	requireTooMany(t, customer.get("/events"), "This session")
	require.Equal(t, before-9-1, b.remaining(b.keyA), "refused requests cost the tenant nothing")

	// Opening the link again, in another browser, gains nothing.
	again := b.browser()
	p := again.get(strings.TrimPrefix(link, b.srv.URL))
	requireTooMany(t, p, "This session")
	require.Empty(t, again.sessionCookie())

	// Another consumer, and the tenant itself, have their own.
	other := b.browser()
	other.openPortal(w.link(t, b.tenantA.ID, "c2", time.Hour, false))
	require.Equal(t, http.StatusOK, other.get("/").Status)
	tenant := b.browser()
	tenant.login(b.keyA)
	require.Equal(t, http.StatusOK, tenant.get("/").Status)

	// A heavy page costs the session five tokens too: with four left, the
	// dead letters are refused and the endpoints are not.
	require.Equal(t, http.StatusOK, tenant.get("/dead").Status)
	requireTooMany(t, tenant.get("/dead"), "This session")
	require.Equal(t, http.StatusOK, tenant.get("/").Status)

	c.advance(time.Second)
	require.Equal(t, http.StatusOK, customer.get("/").Status)
}

// TestHeavyPagesCostMore holds the routes listed as heavy to the routes
// the dashboard has: each of them costs five tokens.
func TestHeavyPagesCostMore(t *testing.T) {
	b, _ := doors(t, apirate.Config{})
	s := b.seed(b.tenantA, "https://a.test/hooks", true)
	br := b.browser()
	br.login(b.keyA)
	ep := s.endpoint.ID.String()
	for path, cost := range map[string]int{
		"/endpoints/" + ep: 5,
		"/dead":            5,
		"/endpoints/" + ep + "/replay?status=dead&from=endpoint": 5,
		"/":                                     1,
		"/events":                               1,
		"/deliveries/" + s.delivery.ID.String(): 1,
	} {
		before := b.remaining(b.keyA)
		p := br.get(path)
		require.Equal(t, http.StatusOK, p.Status, "%s: %s", path, p.Body)
		require.Equal(t, before-1-cost, b.remaining(b.keyA), path)
	}
}

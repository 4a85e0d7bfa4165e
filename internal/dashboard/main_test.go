package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/dashboard"
	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
	"github.com/sluice-dev/sluice/internal/testkit/dispatchtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// dashboardKey stands in for SLUICE_ENCRYPTION_KEY.
var dashboardKey = bytes.Repeat([]byte{7}, 32)

// bundle is one test's dashboard server, store and two tenants.
type bundle struct {
	t       *testing.T
	srv     *httptest.Server
	store   *store.Store
	jobs    *jobs.Queue
	nudger  *dispatch.Nudger
	tenantA sluice.Tenant
	keyA    string
	tenantB sluice.Tenant
	keyB    string
	// clock, when set, is the dashboard's time (setClock); else time.Now.
	clock atomic.Pointer[time.Time]
}

// setClock stops the dashboard's clock at now.
func (b *bundle) setClock(now time.Time) { b.clock.Store(&now) }

// now is the dashboard's clock.
func (b *bundle) now() time.Time {
	if t := b.clock.Load(); t != nil {
		return *t
	}
	return time.Now()
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return setupWith(t, func(b *bundle) http.Handler {
		return dashboard.New(controltest.New(b.store, controltest.Options{PortalKey: dashboardKey, Nudger: b.nudger, Now: b.now}), dashboard.Config{Key: dashboardKey, Now: b.now, Limits: looseLimits(b.store)}).Handler()
	})
}

// setupWith is setup serving what serve makes of the bundle.
func setupWith(t *testing.T, serve func(*bundle) http.Handler) *bundle {
	t.Helper()
	t.Parallel()
	f := storetest.New(t)
	b := &bundle{t: t, store: f.Store, jobs: f.Jobs, nudger: dispatchtest.Nudger(f.Store, f.Jobs), tenantA: f.TenantA, keyA: f.KeyA, tenantB: f.TenantB, keyB: f.KeyB}
	b.srv = httptest.NewServer(serve(b))
	t.Cleanup(b.srv.Close)
	return b
}

// looseLimits are rate limits no test but ratelimit_test.go's meets: a
// tenant's and a session's at a million a second. Failed authentications
// keep their default limit.
func looseLimits(st *store.Store) *apirate.Limits {
	loose := apirate.MustParse("1000000/s")
	return apirate.New(apirate.Config{Tenant: loose, Session: loose, Rates: st})
}

// seeded is an endpoint with one event fanned out to it.
type seeded struct {
	endpoint sluice.Endpoint
	secret   string // set by seedFor
	event    sluice.Event
	delivery sluice.Delivery
}

// seed creates an endpoint of tenant subscribed to everything, posts one
// event and fans it out; with dead, the delivery then fails its one attempt
// for good (HTTP 500 with body).
func (b *bundle) seed(tenant sluice.Tenant, url string, dead bool) seeded {
	t := b.t
	t.Helper()
	ctx := context.Background()
	ep, err := b.store.CreateEndpoint(ctx, tenant.ID, sluice.EndpointSettings{
		URL: url, Description: "orders", MaxInFlight: 10,
		RateLimit: &sluice.RateLimit{PerSecond: 5, Burst: 10},
	}, storetest.Secret)
	require.NoError(t, err)
	_, err = b.store.CreateSubscription(ctx, tenant.ID, ep.ID, []string{"*"}, nil)
	require.NoError(t, err)
	ev := b.event(tenant, "order.created", `{"order":{"id":42,"total":"9.99"}}`)
	page, err := b.store.ListDeliveries(ctx, tenant.ID, sluice.DeliveryFilter{EndpointID: &ep.ID}, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	s := seeded{endpoint: ep, event: ev, delivery: page.Items[0]}
	if dead {
		b.kill(ep.ID, 500, "boom", `<script>alert("x")</script> server exploded`)
		s.delivery, _, err = b.store.GetDelivery(ctx, tenant.ID, s.delivery.ID)
		require.NoError(t, err)
		require.Equal(t, sluice.DeliveryDead, s.delivery.Status)
	}
	return s
}

// event posts an event as tenant and fans it out at once.
func (b *bundle) event(tenant sluice.Tenant, eventType, payload string) sluice.Event {
	t := b.t
	t.Helper()
	ctx := context.Background()
	ev, _, err := fanout.InsertOne(ctx, b.store, tenant.ID, sluice.NewEvent{Type: eventType, Payload: json.RawMessage(payload)}, b.jobs)
	require.NoError(t, err)
	_, _, err = fanout.Events(ctx, b.store, []uuid.UUID{ev.ID}, nil)
	require.NoError(t, err)
	return ev
}

// kill makes every due delivery of an endpoint fail its last attempt, as
// a dispatcher would record it.
func (b *bundle) kill(endpointID uuid.UUID, status int, errMsg, body string) {
	t := b.t
	t.Helper()
	n := dispatchtest.Settle(t, b.store, endpointID, func(c dispatch.Claimed) dispatch.Outcome {
		return dispatch.Outcome{
			DeliveryID: c.ID, EventID: c.EventID, Status: sluice.DeliveryDead, Failed: true,
			NextAttemptAt: time.Now(),
			At:            time.Now(), StatusCode: status, Error: errMsg, LatencyMS: 12, ResponseBody: body,
		}
	})
	require.NotZero(t, n)
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects, so tests see every answer.
type browser struct {
	b      *bundle
	client *http.Client
}

func (b *bundle) browser() *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(b.t, err)
	return &browser{b: b, client: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       10 * time.Second,
	}}
}

// page is an answer.
type page struct {
	Status int
	Header http.Header
	Body   string
}

// Location is the redirect target, as a path with query.
func (p page) Location() string { return p.Header.Get("Location") }

func (br *browser) do(req *http.Request) page {
	t := br.b.t
	t.Helper()
	res, err := br.client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.NotEqual(t, http.StatusInternalServerError, res.StatusCode, "%s %s: %s", req.Method, req.URL, body)
	return page{Status: res.StatusCode, Header: res.Header, Body: string(body)}
}

func (br *browser) get(path string) page {
	br.b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, br.b.srv.URL+path, nil)
	require.NoError(br.b.t, err)
	return br.do(req)
}

// post sends a form, with headers as name, value pairs.
func (br *browser) post(path string, form url.Values, headers ...string) page {
	br.b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, br.b.srv.URL+path, strings.NewReader(form.Encode()))
	require.NoError(br.b.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return br.do(req)
}

// login signs in with key and requires it to work.
func (br *browser) login(key string) {
	t := br.b.t
	t.Helper()
	p := br.post("/login", url.Values{"api_key": {key}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/", p.Location())
}

var csrfRe = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// csrf is the CSRF token of the forms of the page at path.
func (br *browser) csrf(path string) string {
	t := br.b.t
	t.Helper()
	p := br.get(path)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	m := csrfRe.FindStringSubmatch(p.Body)
	require.NotNil(t, m, "no CSRF token on %s", path)
	return html.UnescapeString(m[1])
}

// sessionCookie is the browser's session cookie value, "" when it has none.
func (br *browser) sessionCookie() string {
	u, _ := url.Parse(br.b.srv.URL)
	for _, c := range br.client.Jar.Cookies(u) {
		if c.Name == dashboard.SessionCookie {
			return c.Value
		}
	}
	return ""
}

// setSessionCookie replaces the browser's session cookie.
func (br *browser) setSessionCookie(value string) {
	u, _ := url.Parse(br.b.srv.URL)
	br.client.Jar.SetCookies(u, []*http.Cookie{{Name: dashboard.SessionCookie, Value: value, Path: "/"}})
}

// urlPartRe is a part of a URL as breakURL writes it.
var urlPartRe = regexp.MustCompile(`(?:<wbr>)?<span class="seg">([^<]*)</span>`)

// requireContains checks that a page shows each of the strings (as HTML,
// a URL read whole: without the spans and <wbr> that let it break after
// its slashes).
func requireContains(t *testing.T, p page, wants ...string) {
	t.Helper()
	body := urlPartRe.ReplaceAllString(p.Body, "$1")
	for _, w := range wants {
		require.Contains(t, body, w, fmt.Sprintf("page does not show %q", w))
	}
}

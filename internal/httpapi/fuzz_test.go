package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/internal/dashboard"
	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
	"github.com/sluice-dev/sluice/internal/testkit/dispatchtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
	"github.com/sluice-dev/sluice/internal/testkit/testca"
)

// Bounds of TestFuzzRoutes; SLUICE_FUZZ_SEED, SLUICE_FUZZ_REQUESTS and
// SLUICE_FUZZ_BUDGET (a duration) override them.
const (
	fuzzRequests = 12000
	fuzzBudget   = 60 * time.Second
	fuzzWorkers  = 4
)

// fuzzTarget is what TestFuzzRoutes sends requests to.
type fuzzTarget struct {
	handler http.Handler
	keyA    string
	keyB    string
	cookie  string // tenant A's dashboard session
	csrf    string
	routes  []fuzzRoute
}

type fuzzRoute struct{ method, pattern string }

// TestFuzzRoutes sends thousands of hostile requests — random bytes,
// invalid UTF-8, NUL, JSON nested 10,000 deep, numbers no type holds,
// garbage cursors, limits, ids, content types and Idempotency-Keys, and
// endpoints with every delivery option (durations, PEM, OAuth2
// credentials, signature schemes, on push and poll endpoints) — to
// every route of the API and of the signed-in dashboard, from a seeded
// source (logged; SLUICE_FUZZ_SEED repeats a run). No answer may be a 5xx,
// nothing may be logged as an error, and every 4xx of the API must be
// problem+json.
func TestFuzzRoutes(t *testing.T) {
	t.Parallel()
	seed := envUint(t, "SLUICE_FUZZ_SEED", 20260101)
	count := int(envUint(t, "SLUICE_FUZZ_REQUESTS", fuzzRequests))
	budget := fuzzBudget
	if raw := os.Getenv("SLUICE_FUZZ_BUDGET"); raw != "" {
		var err error
		budget, err = time.ParseDuration(raw)
		require.NoError(t, err)
	}
	t.Logf("fuzz seed %d (SLUICE_FUZZ_SEED=%d repeats this run), %d requests", seed, seed, count)

	var logs lockedBuffer
	target, ids := newFuzzTarget(t, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelError})))
	// ids holds an endpoint, a subscription and an event of each tenant,
	// tenant A's twice first.
	g := &fuzzGen{r: rand.New(rand.NewPCG(seed, seed^0x5eed)), ids: ids, endpoints: []string{ids[0], ids[3]}, pem: newFuzzPEM(t)}
	reqs := make([]fuzzRequest, count)
	for i := range reqs {
		reqs[i] = target.request(g)
	}
	requireOptionsCovered(t, reqs)

	start := time.Now()
	res := runFuzz(target.handler, reqs, budget)
	elapsed := time.Since(start)
	t.Logf("fuzz: %d of %d requests in %s; by status class: %v", res.sent.Load(), count, elapsed.Round(time.Millisecond), res.classes())
	t.Logf("fuzz: endpoint writes accepted, by delivery option named: %v", res.stored)
	if int(res.sent.Load()) < count {
		t.Logf("fuzz: time budget %s ran out before every request was sent", budget)
	}
	for _, f := range res.failures() {
		t.Error(f)
	}
	require.Zero(t, res.byClass[5].Load(), "5xx answers; logged:\n%.3000s", logs.String())
	require.NotContains(t, logs.String(), "level=ERROR", "errors logged:\n%.3000s", logs.String())
}

func envUint(t *testing.T, name string, def uint64) uint64 {
	raw := os.Getenv(name)
	if raw == "" {
		return def
	}
	n, err := strconv.ParseUint(raw, 10, 64)
	require.NoError(t, err, name)
	return n
}

// newFuzzTarget serves the API and the dashboard on one router, as the
// server does, with a few real objects of both tenants to aim at; it
// returns their ids.
func newFuzzTarget(t *testing.T, logger *slog.Logger) (*fuzzTarget, []string) {
	f := storetest.New(t)
	a := httpapi.New(controltest.New(f.Store, controltest.Options{AllowPrivateTargets: true, Nudger: dispatchtest.Nudger(f.Store, f.Jobs)}), httpapi.Config{Ingest: httpapi.StartIngest(t, f.Store, dispatchtest.Nudger(f.Store, f.Jobs)), Logger: logger, APIRate: testRate})
	r := chi.NewRouter()
	a.Mount(r)
	dashboard.New(controltest.New(f.Store, controltest.Options{PortalKey: bytes.Repeat([]byte{7}, 32), Nudger: dispatchtest.Nudger(f.Store, f.Jobs)}), dashboard.Config{Key: bytes.Repeat([]byte{7}, 32), Logger: logger}).Mount(r)
	target := &fuzzTarget{handler: r, keyA: f.KeyA, keyB: f.KeyB, routes: walkRoutes(t, r)}
	requireOpenAPIRoutes(t, target.routes)

	ctx := context.Background()
	var ids []string
	var events []uuid.UUID
	for _, tenant := range []sluice.Tenant{f.TenantA, f.TenantA, f.TenantB} {
		ep, err := f.Store.CreateEndpoint(ctx, tenant.ID, sluice.EndpointSettings{URL: "http://127.0.0.1:9/hook", MaxInFlight: 1}, storetest.Secret)
		require.NoError(t, err)
		sub, err := f.Store.CreateSubscription(ctx, tenant.ID, ep.ID, []string{"*"}, nil)
		require.NoError(t, err)
		ev, _, err := fanout.InsertOne(ctx, f.Store, tenant.ID, sluice.NewEvent{Type: "order.created", Payload: []byte(`{"n":1}`)}, f.Jobs)
		require.NoError(t, err)
		ids = append(ids, ep.ID.String(), sub.ID.String(), ev.ID.String())
		events = append(events, ev.ID)
	}
	_, _, err := fanout.Events(ctx, f.Store, events, nil)
	require.NoError(t, err)
	for _, tenant := range []sluice.Tenant{f.TenantA, f.TenantB} {
		page, err := f.Store.ListDeliveries(ctx, tenant.ID, sluice.DeliveryFilter{}, sluice.PageParams{Limit: 10})
		require.NoError(t, err)
		for _, d := range page.Items {
			ids = append(ids, d.ID.String())
		}
	}
	target.signIn(t)
	return target, ids
}

// newFuzzPEM issues the certificates the fuzz's tls options are made of.
func newFuzzPEM(t *testing.T) fuzzPEM {
	ca := testca.New(t, "fuzz")
	cert := ca.Issue(t, testca.Options{CommonName: "fuzz-client", Client: true})
	expired := ca.Issue(t, testca.Options{CommonName: "fuzz-expired", Client: true, NotAfter: time.Now().Add(-time.Minute)})
	other := ca.Issue(t, testca.Options{CommonName: "fuzz-other", Client: true})
	return fuzzPEM{cert: cert.PEM, key: cert.KeyPEM, ca: ca.PEM, expired: expired.PEM, otherKey: other.KeyPEM}
}

// walkRoutes lists every method and pattern of the router.
func walkRoutes(t *testing.T, r chi.Routes) []fuzzRoute {
	var out []fuzzRoute
	require.NoError(t, chi.Walk(r, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		out = append(out, fuzzRoute{method, strings.TrimSuffix(route, "/*")})
		return nil
	}))
	require.Greater(t, len(out), 20)
	return out
}

// requireOpenAPIRoutes checks that the walk found every operation of
// openapi.yaml, so the fuzz covers the whole documented API.
func requireOpenAPIRoutes(t *testing.T, routes []fuzzRoute) {
	doc, err := api.GetSpec()
	require.NoError(t, err)
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			require.True(t, slices.Contains(routes, fuzzRoute{method, path}), "%s %s of openapi.yaml is not routed", method, path)
		}
	}
}

var csrfField = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// signIn opens a dashboard session of tenant A and reads its CSRF token.
func (ft *fuzzTarget) signIn(t *testing.T) {
	rec := serve(ft.handler, newRequest(http.MethodPost, "/login", "", []byte(url.Values{"api_key": {ft.keyA}}.Encode()),
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}))
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	for _, c := range rec.Result().Cookies() {
		if c.Name == dashboard.SessionCookie {
			ft.cookie = c.Value
		}
	}
	require.NotEmpty(t, ft.cookie)
	rec = serve(ft.handler, newRequest(http.MethodGet, "/", "", nil, http.Header{"Cookie": {dashboard.SessionCookie + "=" + ft.cookie}}))
	m := csrfField.FindStringSubmatch(rec.Body.String())
	require.NotNil(t, m, rec.Body.String())
	ft.csrf = strings.ReplaceAll(m[1], "&#43;", "+")
}

// fuzzRequest is one request to send, kept as data so the whole run is
// made up front from the seed.
type fuzzRequest struct {
	method, path, query string
	pattern             string // the route's
	body                []byte
	header              http.Header
}

func (fr fuzzRequest) String() string {
	return fmt.Sprintf("%s %q ?%q (%d-byte body %.80q, headers %q)", fr.method, fr.path, fr.query, len(fr.body), fr.body, fr.header)
}

var routeParam = regexp.MustCompile(`\{[^}]+\}`)

// request makes one hostile request to a random route.
func (ft *fuzzTarget) request(g *fuzzGen) fuzzRequest {
	rt := pick(g, ft.routes...)
	fr := fuzzRequest{method: rt.method, pattern: rt.pattern, header: http.Header{}}
	if g.chance(8) {
		fr.method = pick(g, "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
	}
	fr.path = routeParam.ReplaceAllStringFunc(rt.pattern, func(string) string {
		if g.chance(80) {
			return g.id()
		}
		return g.text()
	})
	if fr.path == "" {
		fr.path = "/"
	}
	if g.chance(60) {
		fr.query = g.query()
	}
	if strings.HasPrefix(fr.path, "/v1") || g.chance(5) {
		ft.apiHeaders(g, fr.header)
		switch write := endpointWrite(fr.method, rt.pattern); {
		case write && g.chance(30):
			// A well-formed write whose options pass, or all but one,
			// so that they are stored and acted on, not only refused.
			fr.query = ""
			fr.header.Del("Idempotency-Key")
			fr.header.Set("Authorization", "Bearer "+ft.keyA)
			if fr.method == http.MethodPatch {
				fr.path = "/v1/endpoints/" + pick(g, g.endpoints...)
			}
			fr.body = []byte(g.validEndpoint())
			fr.header.Set("Content-Type", "application/json")
		case write && g.chance(50):
			fr.body = []byte(g.endpoint())
			fr.header.Set("Content-Type", g.contentType("application/json"))
		case fr.method != "GET" || g.chance(5):
			fr.body = g.body()
			fr.header.Set("Content-Type", g.contentType("application/json"))
		}
	} else {
		ft.dashboardHeaders(g, fr.header)
		if fr.method == "POST" {
			fr.body = g.form(ft.csrf)
			fr.header.Set("Content-Type", g.contentType("application/x-www-form-urlencoded"))
		}
	}
	return fr
}

// endpointWrite reports whether method and pattern create or update an
// endpoint.
func endpointWrite(method, pattern string) bool {
	return method == http.MethodPost && pattern == "/v1/endpoints" || method == http.MethodPatch && pattern == "/v1/endpoints/{id}"
}

// requireOptionsCovered checks that reqs send every delivery option, by
// its JSON name, to a route that creates or updates an endpoint many
// times, so the fuzz reaches each option's rules.
func requireOptionsCovered(t *testing.T, reqs []fuzzRequest) {
	sent := map[string]int{}
	for _, fr := range reqs {
		if !endpointWrite(fr.method, fr.pattern) {
			continue
		}
		for _, name := range sluice.DeliveryOptionNames {
			if bytes.Contains(fr.body, []byte(`"`+name+`":`)) {
				sent[name]++
			}
		}
	}
	t.Logf("fuzz: delivery options sent to endpoint writes: %v", sent)
	for _, name := range sluice.DeliveryOptionNames {
		require.GreaterOrEqual(t, sent[name], 20, "the fuzz sends %s to endpoint writes", name)
	}
}

func (ft *fuzzTarget) apiHeaders(g *fuzzGen, h http.Header) {
	switch n := g.r.IntN(100); {
	case n < 88:
		h.Set("Authorization", "Bearer "+ft.keyA)
	case n < 94:
		h.Set("Authorization", "Bearer "+ft.keyB)
	case n < 97:
		h.Set("Authorization", "Bearer "+g.text())
	}
	if g.chance(30) {
		h["Idempotency-Key"] = []string{g.text()}
	}
}

func (ft *fuzzTarget) dashboardHeaders(g *fuzzGen, h http.Header) {
	switch n := g.r.IntN(100); {
	case n < 90:
		h.Set("Cookie", dashboard.SessionCookie+"="+ft.cookie)
	case n < 95:
		h.Set("Cookie", dashboard.SessionCookie+"="+url.QueryEscape(g.text()))
	}
}

func newRequest(method, path, query string, body []byte, header http.Header) *http.Request {
	r := &http.Request{
		Method: method, URL: &url.URL{Path: path, RawQuery: query}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: header, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
		Host: "sluice.test", RemoteAddr: "192.0.2.1:1234", RequestURI: path,
	}
	return r.WithContext(context.Background())
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// fuzzResults counts answers by status class and keeps the first few
// failures.
type fuzzResults struct {
	sent    atomic.Int64
	byClass [6]atomic.Int64
	mu      sync.Mutex
	fails   []string
	stored  map[string]int // endpoint writes answered 2xx, by delivery option named
}

func (fr *fuzzResults) fail(msg string) {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	if len(fr.fails) < 20 {
		fr.fails = append(fr.fails, msg)
	}
}

func (fr *fuzzResults) failures() []string {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return fr.fails
}

func (fr *fuzzResults) classes() map[string]int64 {
	out := map[string]int64{}
	for c := 1; c <= 5; c++ {
		out[fmt.Sprintf("%dxx", c)] = fr.byClass[c].Load()
	}
	return out
}

// runFuzz sends reqs from fuzzWorkers goroutines until done or budget runs
// out, and checks each answer.
func runFuzz(h http.Handler, reqs []fuzzRequest, budget time.Duration) *fuzzResults {
	res := &fuzzResults{stored: map[string]int{}}
	deadline := time.Now().Add(budget)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range fuzzWorkers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(reqs)) && time.Now().Before(deadline); i = next.Add(1) - 1 {
				fr := reqs[i]
				rec := serve(h, newRequest(fr.method, fr.path, fr.query, fr.body, fr.header))
				res.sent.Add(1)
				res.check(fr, rec)
			}
		})
	}
	wg.Wait()
	return res
}

func (fr *fuzzResults) check(req fuzzRequest, rec *httptest.ResponseRecorder) {
	class := min(max(rec.Code/100, 1), 5)
	fr.byClass[class].Add(1)
	switch {
	case class == 5:
		fr.fail(fmt.Sprintf("%d to %s: %.300s", rec.Code, req, rec.Body.String()))
	case class == 4 && strings.HasPrefix(req.path, "/v1") && rec.Header().Get("Content-Type") != "application/problem+json":
		fr.fail(fmt.Sprintf("%d to %s is %q, not problem+json: %.300s", rec.Code, req, rec.Header().Get("Content-Type"), rec.Body.String()))
	case class == 2 && endpointWrite(req.method, req.pattern):
		fr.mu.Lock()
		for _, name := range sluice.DeliveryOptionNames {
			if bytes.Contains(req.body, []byte(`"`+name+`":`)) {
				fr.stored[name]++
			}
		}
		fr.mu.Unlock()
	}
}

// lockedBuffer is a log destination safe for concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

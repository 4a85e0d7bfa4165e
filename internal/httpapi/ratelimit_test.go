package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
	"github.com/sluice-dev/sluice/internal/testkit/dispatchtest"
	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// testRate is the API rate of the tests' servers: high enough that no test
// but these meets it. These lower one tenant's own rate instead.
var testRate = apirate.MustParse("1000000/s")

// checkRateHeaders requires the RateLimit headers on every authenticated
// /v1 answer.
func checkRateHeaders(t *testing.T, req *http.Request, res *http.Response) {
	t.Helper()
	if !strings.HasPrefix(req.URL.Path, "/v1") || res.StatusCode == http.StatusUnauthorized {
		return
	}
	for _, h := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
		v, err := strconv.Atoi(res.Header.Get(h))
		require.NoError(t, err, "%s %s answered %d without a numeric %s", req.Method, req.URL.Path, res.StatusCode, h)
		require.GreaterOrEqual(t, v, 0, h)
	}
}

// setRate gives a tenant its own API rate, as `sluice tenant set-rate` does.
func (b *testBundle) setRate(tenant string, rate string) {
	b.t.Helper()
	id := b.tenantA.ID
	if tenant == "B" {
		id = b.tenantB.ID
	}
	require.NoError(b.t, b.store.SetTenantAPIRate(context.Background(), id, &rate))
}

// clock is the buckets' time, moved only by the test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_800_000_000, 0)} }

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

func TestRateLimit429AndRecovery(t *testing.T) {
	c := newClock()
	b := setupWith(t, apirate.Config{Tenant: testRate, Now: c.now})
	b.setRate("A", "2/s") // bursts of 4
	for i := range 4 {
		r := b.do(b.keyA, http.MethodGet, "/v1/endpoints", nil)
		require.Equal(t, http.StatusOK, r.Status, "request %d", i)
		require.Equal(t, "4", r.Header.Get("RateLimit-Limit"))
		require.Equal(t, strconv.Itoa(3-i), r.Header.Get("RateLimit-Remaining"))
	}
	r := b.do(b.keyA, http.MethodGet, "/v1/endpoints", nil)
	p := requireProblem(t, r, http.StatusTooManyRequests)
	require.Equal(t, "https://sluice.dev/problems/rate-limited", p["type"])
	require.Equal(t, "1", r.Header.Get("Retry-After"))
	require.Equal(t, "0", r.Header.Get("RateLimit-Remaining"))
	require.Equal(t, "2", r.Header.Get("RateLimit-Reset"), "4 tokens at 2/s")

	// Tenant B's bucket is its own, at the default rate.
	r = b.do(b.keyB, http.MethodGet, "/v1/endpoints", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, strconv.Itoa(testRate.Burst()-1), r.Header.Get("RateLimit-Remaining"))

	// Writes are limited too, before their body is looked at.
	requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/events", map[string]any{"type": "a", "payload": map[string]any{}}), http.StatusTooManyRequests)

	c.advance(time.Second) // Retry-After
	require.Equal(t, http.StatusOK, b.do(b.keyA, http.MethodGet, "/v1/endpoints", nil).Status)
}

func TestRateLimitBatchCountsPerHundredEvents(t *testing.T) {
	b := setupWith(t, apirate.Config{Tenant: testRate, Now: newClock().now})
	b.setRate("A", "10/m") // bursts of 1: a 450-event batch puts 4 tokens of debt on top
	events := make([]map[string]any, 450)
	for i := range events {
		events[i] = map[string]any{"type": "order.created", "payload": map[string]any{"n": i}}
	}
	r := b.do(b.keyA, http.MethodPost, "/v1/events/batch", map[string]any{"events": events})
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	require.Equal(t, "0", r.Header.Get("RateLimit-Remaining"))
	reset, err := strconv.Atoi(r.Header.Get("RateLimit-Reset"))
	require.NoError(t, err)
	require.Equal(t, 30, reset, "5 tokens (1 up front, 4 after decoding) at 10/m: full again in 30 s")
	r = b.do(b.keyA, http.MethodGet, "/v1/endpoints", nil)
	requireProblem(t, r, http.StatusTooManyRequests)
	retry, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.Equal(t, 30, retry, "the debt is repaid before the next request")
}

// doRaw sends body with exactly this Content-Type (none when empty) and
// checks the answer against openapi.yaml.
func (b *testBundle) doRaw(method, path, contentType, body string) response {
	t := b.t
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, b.srv.URL+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+b.keyA)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	resBody, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	checkContract(t, req, []byte(body), res, resBody)
	checkRateHeaders(t, req, res)
	return response{Status: res.StatusCode, Header: res.Header, Body: resBody}
}

func TestUnsupportedMediaType(t *testing.T) {
	b := setup(t)
	ep := b.createEndpoint(b.keyA, nil)["id"].(string)
	endpoint := `{"url":"https://example.com/hook"}`
	for _, tc := range []struct {
		method, path, contentType, body string
	}{
		{"POST", "/v1/endpoints", "", endpoint},
		{"POST", "/v1/endpoints", "application/x-www-form-urlencoded", endpoint},
		{"POST", "/v1/endpoints", "text/plain", endpoint},
		{"POST", "/v1/endpoints", "application/jsonx", endpoint},
		{"POST", "/v1/endpoints", "not a media type", endpoint},
		{"PATCH", "/v1/endpoints/" + ep, "text/json", `{"description":"x"}`},
		{"POST", "/v1/subscriptions", "multipart/form-data; boundary=x", `{}`},
		{"POST", "/v1/events", "application/x-www-form-urlencoded", `{"type":"a","payload":{}}`},
		{"POST", "/v1/events/batch", "", `{"events":[]}`},
		{"POST", "/v1/endpoints/" + ep + "/replay", "text/plain", `{"status":"dead"}`},
	} {
		r := b.doRaw(tc.method, tc.path, tc.contentType, tc.body)
		p := requireProblem(t, r, http.StatusUnsupportedMediaType)
		require.Equal(t, "https://sluice.dev/problems/unsupported-media-type", p["type"], "%s %s %q", tc.method, tc.path, tc.contentType)
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		r := b.doRaw("POST", "/v1/endpoints", ct, endpoint)
		require.Equal(t, http.StatusCreated, r.Status, "%q: %s", ct, r.Body)
	}
	// Any JSON-based type is JSON (openapi.yaml names only application/json).
	req := httptest.NewRequest(http.MethodPost, "/v1/endpoints", strings.NewReader(endpoint))
	req.Header.Set("Authorization", "Bearer "+b.keyA)
	req.Header.Set("Content-Type", "application/vnd.sluice+json")
	w := httptest.NewRecorder()
	b.handler.ServeHTTP(w, req)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	// POSTs that take no body need no Content-Type.
	require.Equal(t, http.StatusOK, b.doRaw("POST", "/v1/endpoints/"+ep+"/secret/rotate", "", "").Status)
	require.Equal(t, http.StatusOK, b.doRaw("POST", "/v1/endpoints/"+ep+"/circuit/close", "", "").Status)
	require.Equal(t, http.StatusAccepted, b.doRaw("POST", "/v1/endpoints/"+ep+"/test", "", "").Status)
}

// pendingBody is a request body that sends nothing until released, and
// records whether anyone read from it.
type pendingBody struct {
	release chan struct{}
	read    chan struct{}
}

func newPendingBody() *pendingBody {
	return &pendingBody{release: make(chan struct{}), read: make(chan struct{}, 1)}
}

func (p *pendingBody) Read(b []byte) (int, error) {
	select {
	case p.read <- struct{}{}:
	default:
	}
	<-p.release
	return 0, io.ErrUnexpectedEOF
}

func TestLargeBatchesRefusedBeforeTheirBodyIsRead(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	api := httpapi.New(controltest.New(f.Store, controltest.Options{Nudger: dispatchtest.Nudger(f.Store, f.Jobs)}), httpapi.Config{Ingest: httpapi.StartIngest(t, f.Store, dispatchtest.Nudger(f.Store, f.Jobs)), APIRate: testRate, MaxLargeBatches: 1})
	h := api.Handler()

	post := func(body io.Reader, length int64) *http.Request {
		req, err := http.NewRequest(http.MethodPost, "/v1/events/batch", body)
		require.NoError(t, err)
		req.ContentLength = length
		req.Header.Set("Authorization", "Bearer "+f.KeyA)
		req.Header.Set("Content-Type", "application/json")
		return req
	}
	// The first large batch is admitted, and waits for its body.
	first := newPendingBody()
	done := make(chan int)
	go func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, post(first, 2<<20))
		done <- w.Code
	}()
	<-first.read

	// The next is refused without a byte of its body read, large by its
	// length or of unknown length alike (its client waits for 100
	// Continue; TestRefusedBatchesGetTheirAnswer has those that do not).
	for _, length := range []int64{2 << 20, -1} {
		second := newPendingBody()
		w := httptest.NewRecorder()
		req := post(second, length)
		req.Header.Set("Expect", "100-continue")
		h.ServeHTTP(w, req)
		require.Equal(t, http.StatusServiceUnavailable, w.Code, w.Body.String())
		require.Equal(t, "1", w.Header().Get("Retry-After"))
		require.Contains(t, w.Body.String(), "https://sluice.dev/problems/unavailable")
		require.Empty(t, second.read, "the refused body was read")
	}
	// Small batches do not wait for large ones.
	small := `{"events":[{"type":"a","payload":{}}]}`
	w := httptest.NewRecorder()
	h.ServeHTTP(w, post(strings.NewReader(small), int64(len(small))))
	require.Equal(t, http.StatusAccepted, w.Code, w.Body.String())

	close(first.release)
	require.Equal(t, http.StatusBadRequest, <-done, "the cut-off first body is malformed")
	event := fmt.Sprintf(`{"type":"a","payload":{"pad":"%s"}}`, strings.Repeat("x", 250<<10))
	big := `{"events":[` + strings.Repeat(event+",", 4) + event + `]}`
	w = httptest.NewRecorder()
	h.ServeHTTP(w, post(strings.NewReader(big), int64(len(big))))
	require.Equal(t, http.StatusAccepted, w.Code, "the turn is free again: %.300s", w.Body.String())
}

// keyLookups counts the API-key lookups a pool runs, by the query's sqlc
// name: all of them (n), and those of the key whose hash is of (ofN).
type keyLookups struct {
	n, ofN atomic.Int64
	of     []byte
}

func (k *keyLookups) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(d.SQL, "-- name: AuthenticateAPIKey ") {
		k.n.Add(1)
		if h, ok := d.Args[0].([]byte); ok && k.of != nil && bytes.Equal(h, k.of) {
			k.ofN.Add(1)
		}
	}
	return ctx
}

func (k *keyLookups) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// clientFrom is an HTTP client whose connections come from addr, one of
// the loopback addresses.
func clientFrom(addr string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, Proxy: nil}}
}

// lookupServer is an API on a database of its own whose pool counts the
// key lookups it runs, with one tenant (its key returned), the buckets on
// clock c.
func lookupServer(t *testing.T, c *clock, limits apirate.Config) (*httptest.Server, *keyLookups, string) {
	t.Helper()
	lookups := &keyLookups{}
	cfg, err := pgxpool.ParseConfig(pgtest.NewDatabase(t))
	require.NoError(t, err)
	store.ConfigurePool(cfg)
	cfg.ConnConfig.Tracer = lookups
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := store.New(pool, nil)
	key := apikey.New()
	lookups.of = apikey.Hash(key)
	_, err = st.CreateTenant(context.Background(), "Acme", "ops@acme.test", apikey.Digest(key))
	require.NoError(t, err)
	limits.Rates, limits.Now = st, c.now
	api := httpapi.New(controltest.New(st, controltest.Options{}), httpapi.Config{Limits: apirate.New(limits)})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return srv, lookups, key
}

// getWith is GET /v1/event-types with key from client.
func getWith(t *testing.T, srv *httptest.Server, client *http.Client, key string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/event-types", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	checkContract(t, req, nil, res, body)
	return res, body
}

// TestFailedAuthThrottledPerAddress: each 401 costs its client address a
// token of ten a minute. Past them a well-formed key is still looked up
// while the address's failed look-ups last (twenty at once, ten a second),
// and a wrong one answers 429; past those, a key this process has not
// found valid lately is answered 429 unlooked, which the database's own
// count of lookups shows. A valid key is served throughout.
func TestFailedAuthThrottledPerAddress(t *testing.T) {
	t.Parallel()
	c := newClock()
	srv, lookups, key := lookupServer(t, c, apirate.Config{})
	get := func(client *http.Client, key string) (*http.Response, []byte) { return getWith(t, srv, client, key) }
	one, two := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")

	for i := range 10 {
		res, _ := get(one, apikey.New())
		require.Equal(t, http.StatusUnauthorized, res.StatusCode, "guess %d", i)
	}
	require.EqualValues(t, 10, lookups.n.Load())
	res, _ := get(one, key)
	require.Equal(t, http.StatusOK, res.StatusCode, "a valid key past its address's limit")
	require.EqualValues(t, 11, lookups.n.Load())
	for i := range 20 {
		res, body := get(one, apikey.New())
		require.Equal(t, http.StatusTooManyRequests, res.StatusCode, "guess %d past the limit, looked up", i)
		require.Contains(t, string(body), "https://sluice.dev/problems/rate-limited")
		require.Contains(t, string(body), "failed authentications")
	}
	require.EqualValues(t, 31, lookups.n.Load(), "twenty failed look-ups past the limit")
	for i := range 50 {
		res, body := get(one, apikey.New())
		require.Equal(t, http.StatusTooManyRequests, res.StatusCode, "guess %d past both limits", i)
		require.Contains(t, string(body), "failed authentications")
		require.NotEmpty(t, res.Header.Get("Retry-After"))
	}
	require.EqualValues(t, 31, lookups.n.Load(), "no lookup past both limits")
	res, _ = get(one, key)
	require.Equal(t, http.StatusOK, res.StatusCode, "the valid key is still served: it was found valid here")

	// Another address is not held back.
	before := lookups.n.Load()
	res, _ = get(two, apikey.New())
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	require.Equal(t, before+1, lookups.n.Load())

	// The failures looked up past the limit were charged: 30 of ten a
	// minute, so the address may fail again two minutes and six seconds on,
	// once; then its look-ups have refilled.
	c.advance(2*time.Minute + time.Second)
	res, _ = get(one, "not-a-key")
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, "still in debt")
	c.advance(5 * time.Second)
	before = lookups.n.Load()
	res, _ = get(one, apikey.New())
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	res, _ = get(one, apikey.New())
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	require.Equal(t, before+2, lookups.n.Load())

	// A missing or malformed key is a failed authentication too, though it
	// costs no lookup, and past the limit it is refused unlooked.
	c.advance(time.Hour)
	before = lookups.n.Load()
	for i := range 10 {
		res, _ := get(one, "not-a-key")
		require.Equal(t, http.StatusUnauthorized, res.StatusCode, "try %d", i)
	}
	res, _ = get(one, "not-a-key")
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	require.Equal(t, before, lookups.n.Load())
}

// TestBadKeysDoNotLockOutAGoodOne: 1,000 requests with bad keys from one
// address, interleaved with a valid key's from the same address, through
// the API on Postgres: every valid request is served, and the bad ones
// cost the database the two buckets' worth of lookups and no more.
func TestBadKeysDoNotLockOutAGoodOne(t *testing.T) {
	t.Parallel()
	c := newClock() // stands still: the buckets never refill
	srv, lookups, key := lookupServer(t, c, apirate.Config{Tenant: testRate})
	client := clientFrom("127.0.0.1")
	statuses := map[int]int{}
	good := 0
	for i := range 1000 {
		bad := apikey.New()
		if i%2 == 1 {
			bad = "sk_not-even-well-formed"
		}
		res, _ := getWith(t, srv, client, bad)
		statuses[res.StatusCode]++
		if i%5 == 0 {
			res, body := getWith(t, srv, client, key)
			good++
			if res.StatusCode == http.StatusTooManyRequests {
				require.NotContains(t, string(body), "failed authentications", "request %d: refused for its neighbour's failures", i)
			} else {
				require.Equal(t, http.StatusOK, res.StatusCode, "request %d: %s", i, body)
			}
		}
	}
	t.Logf("bad keys: %v; valid key: %d requests, %d lookups; all lookups: %d", statuses, good, lookups.ofN.Load(), lookups.n.Load())
	require.Equal(t, 10, statuses[http.StatusUnauthorized], "ten failures, then 429")
	require.Equal(t, 990, statuses[http.StatusTooManyRequests])
	require.EqualValues(t, 5+20, lookups.n.Load()-lookups.ofN.Load(),
		"bad keys looked up: five of the ten failures (the others malformed), then the twenty failed look-ups")
}

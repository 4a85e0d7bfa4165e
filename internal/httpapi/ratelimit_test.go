package httpapi_test

import (
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
// name.
type keyLookups struct{ n atomic.Int64 }

func (k *keyLookups) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(d.SQL, "-- name: AuthenticateAPIKey ") {
		k.n.Add(1)
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

// TestFailedAuthThrottledPerAddress: each 401 costs its client address a
// token of ten a minute; past them the address is answered 429 before its
// key is looked up, which the database's own count of lookups shows.
func TestFailedAuthThrottledPerAddress(t *testing.T) {
	t.Parallel()
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
	_, err = st.CreateTenant(context.Background(), "Acme", "ops@acme.test", apikey.Digest(key))
	require.NoError(t, err)
	c := newClock()
	api := httpapi.New(controltest.New(st, controltest.Options{}), httpapi.Config{Limits: apirate.New(apirate.Config{Rates: st, Now: c.now})})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)

	get := func(client *http.Client, key string) (*http.Response, []byte) {
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
	one, two := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")

	for i := range 10 {
		res, _ := get(one, apikey.New())
		require.Equal(t, http.StatusUnauthorized, res.StatusCode, "guess %d", i)
	}
	require.EqualValues(t, 10, lookups.n.Load())
	for i := range 50 {
		res, body := get(one, apikey.New())
		require.Equal(t, http.StatusTooManyRequests, res.StatusCode, "guess %d past the limit", i)
		require.Contains(t, string(body), "https://sluice.dev/problems/rate-limited")
		require.Contains(t, string(body), "failed authentications")
		require.Equal(t, "6", res.Header.Get("Retry-After"), "one more try every 6 s")
	}
	// Even a good key: telling it apart would cost a lookup.
	res, _ := get(one, key)
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	require.EqualValues(t, 10, lookups.n.Load(), "no lookup past the limit")

	// Another address is not held back.
	res, _ = get(two, apikey.New())
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	res, _ = get(two, key)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.EqualValues(t, 12, lookups.n.Load())

	// Six seconds on, the first address has one more try.
	c.advance(6 * time.Second)
	res, _ = get(one, apikey.New())
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	res, _ = get(one, apikey.New())
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	require.EqualValues(t, 13, lookups.n.Load())

	// A missing or malformed key is a failed authentication too, though it
	// costs no lookup.
	c.advance(time.Minute)
	for i := range 10 {
		res, _ := get(one, "not-a-key")
		require.Equal(t, http.StatusUnauthorized, res.StatusCode, "try %d", i)
	}
	res, _ = get(one, "not-a-key")
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	require.EqualValues(t, 13, lookups.n.Load())
}

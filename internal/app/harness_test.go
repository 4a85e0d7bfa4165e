package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/jobs/jobstest"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

const testKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

// harness is a whole Sluice (API and workers) on its own database.
type harness struct {
	t      *testing.T
	dbURL  string
	env    map[string]string
	proc   *app.Process
	srv    *httptest.Server
	tenant sluice.Tenant
	key    string
}

// start runs Sluice (API and workers) with the given settings over fast
// test defaults.
func start(t *testing.T, env map[string]string) *harness {
	t.Helper()
	return startWith(t, env, app.Roles{API: true, Worker: true})
}

// startWith is start with a choice of roles.
func startWith(t *testing.T, env map[string]string, roles app.Roles) *harness {
	t.Helper()
	t.Parallel()
	return setup(t, env, roles)
}

// startTimed is startWith for tests that hold Sluice to the clock (rate
// limits, throttle windows, probe intervals): they do not run in parallel
// with this package's other tests, which would otherwise starve the
// dispatcher they time of the box's two cores. Other packages' tests still
// run beside them.
func startTimed(t *testing.T, env map[string]string, roles app.Roles) *harness {
	t.Helper()
	return setup(t, env, roles)
}

// setup builds the harness.
func setup(t *testing.T, env map[string]string, roles app.Roles) *harness {
	t.Helper()
	h := &harness{t: t, dbURL: pgtest.NewDatabase(t), env: map[string]string{
		"SLUICE_ENCRYPTION_KEY":        testKey,
		"SLUICE_ALLOW_PRIVATE_TARGETS": "true",
		"SLUICE_RETRY_SCHEDULE":        "50ms,50ms",
		"SLUICE_DELIVERY_TIMEOUT":      "2s",
		"SLUICE_CIRCUIT_THRESHOLD":     "1000", // circuit tests lower it
		"SLUICE_CIRCUIT_PROBE":         "100ms",
		"SLUICE_THROTTLE_SCHEDULE":     "200ms,400ms",
		"SLUICE_API_RATE":              "1000000/s", // rate-limit tests lower it
	}}
	h.env["DATABASE_URL"] = h.dbURL
	for k, v := range env {
		h.env[k] = v
	}
	h.proc = h.process(roles)
	h.srv = httptest.NewServer(h.proc.Handler)
	t.Cleanup(h.srv.Close)
	var err error
	h.key = apikey.New()
	h.tenant, err = h.proc.Store.CreateTenant(context.Background(), "Acme", "ops@acme.test", apikey.Digest(h.key))
	require.NoError(t, err)
	return h
}

// process builds and starts another process on the harness's database.
func (h *harness) process(roles app.Roles) *app.Process {
	h.t.Helper()
	cfg, err := config.Parse(func(k string) string { return h.env[k] }, true)
	require.NoError(h.t, err)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	p, err := app.New(context.Background(), cfg, roles, logger)
	require.NoError(h.t, err)
	require.NoError(h.t, p.Start(context.Background()))
	h.t.Cleanup(p.Close)
	return p
}

// call sends a request to the API, with headers given as name, value pairs,
// and decodes a JSON answer into out (if not nil), requiring the status.
func (h *harness) call(method, path string, body any, status int, out any, headers ...string) http.Header {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(h.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	require.NoError(h.t, err)
	req.Header.Set("Authorization", "Bearer "+h.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := h.srv.Client().Do(req)
	require.NoError(h.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(h.t, err)
	require.Equal(h.t, status, res.StatusCode, "%s %s: %s", method, path, raw)
	if out != nil {
		require.NoError(h.t, json.Unmarshal(raw, out), string(raw))
	}
	return res.Header
}

// endpoint creates an endpoint for rcv subscribed to patterns, and makes
// rcv verify signatures with its secret.
func (h *harness) endpoint(rcv *receiver.Receiver, patterns []string, extra map[string]any) (id, secret string) {
	h.t.Helper()
	body := map[string]any{"url": rcv.URL()}
	for k, v := range extra {
		body[k] = v
	}
	var ep struct{ ID, Secret string }
	h.call(http.MethodPost, "/v1/endpoints", body, http.StatusCreated, &ep)
	require.NoError(h.t, rcv.SetSecret(ep.Secret))
	if len(patterns) > 0 {
		h.call(http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": ep.ID, "event_types": patterns}, http.StatusCreated, nil)
	}
	return ep.ID, ep.Secret
}

// post sends one event and returns its id.
func (h *harness) post(eventType string, payload any) string {
	h.t.Helper()
	var ev struct{ ID string }
	h.call(http.MethodPost, "/v1/events", map[string]any{"type": eventType, "payload": payload}, http.StatusAccepted, &ev)
	return ev.ID
}

// postBatch posts n events of one type in one request.
func (h *harness) postBatch(eventType string, n int) {
	h.t.Helper()
	events := make([]map[string]any, n)
	for i := range events {
		events[i] = map[string]any{"type": eventType, "payload": map[string]int{"i": i}}
	}
	h.call(http.MethodPost, "/v1/events/batch", map[string]any{"events": events}, http.StatusAccepted, nil)
}

// delivery is a delivery as the API shows it, with attempts.
type delivery struct {
	ID           string `json:"id"`
	EventID      string `json:"event_id"`
	EndpointID   string `json:"endpoint_id"`
	Status       string `json:"status"`
	AttemptCount int    `json:"attempt_count"`
	ReplayedFrom string `json:"replayed_from"`
	Attempts     []struct {
		StatusCode   *int    `json:"status_code"`
		Error        *string `json:"error"`
		ResponseBody *string `json:"response_body"`
		LatencyMS    *int    `json:"latency_ms"`
	} `json:"attempts"`
}

// deliveries lists deliveries matching a query string.
func (h *harness) deliveries(query string) []delivery {
	h.t.Helper()
	var page struct{ Data []delivery }
	h.call(http.MethodGet, "/v1/deliveries?limit=500&"+query, nil, http.StatusOK, &page)
	return page.Data
}

// eventually polls cond, on the test's goroutine, until it holds or
// timeout passes: a bounded poll of a real condition, for what has no
// signal of its own.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out after %s: "+msg, append([]any{timeout}, args...)...)
		case <-tick.C:
		}
	}
}

// settle waits until Sluice has nothing left to do: no delivery queued and
// no job (fan-out, dispatch, replay, alert email) waiting, running or due
// for a retry. Whatever the workers could still have sent or mailed has
// been sent by then, so a check that something did not happen (a
// duplicate, a stray request, a second email) follows it.
func (h *harness) settle() {
	h.t.Helper()
	var queued, unfinished int
	eventually(h.t, 30*time.Second, func() bool {
		ctx := context.Background()
		// One snapshot for both counts, as one statement would read them.
		tx, err := h.proc.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		require.NoError(h.t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		require.NoError(h.t, tx.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE status IN ('pending', 'failed')`).Scan(&queued))
		unfinished = 0
		for _, j := range jobstest.Live(jobstest.All(h.t, tx)) {
			if j.Kind != (jobs.RetentionArgs{}).Kind() {
				unfinished++
			}
		}
		return queued == 0 && unfinished == 0
	},
		"Sluice settles: %v deliveries queued, %v jobs unfinished", lazy(func() any { return queued }), lazy(func() any { return unfinished }))
}

// finished waits until no job of this kind is waiting, running or due
// for a retry: for a test whose endpoint stays parked, so that it never
// settles.
func (h *harness) finished(kind string) {
	h.t.Helper()
	var unfinished int
	eventually(h.t, 30*time.Second, func() bool {
		unfinished = len(jobstest.Live(jobstest.OfKind(h.t, h.proc.Pool, kind)))
		return unfinished == 0
	}, "%v %s jobs unfinished", lazy(func() any { return unfinished }), kind)
}

// lazy is a value formatted when a message is printed, not when it is
// passed.
type lazy func() any

func (l lazy) String() string { return fmt.Sprint(l()) }

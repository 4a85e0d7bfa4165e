package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
	"github.com/sluice-dev/sluice/internal/testkit/dispatchtest"
	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
	"github.com/sluice-dev/sluice/internal/testkit/tcpproxy"
)

// TestDatabaseWaitsAreBounded serves the API on a pool built as `sluice
// serve` builds it, through a proxy that can hold every byte, with a bound
// of one second on waiting for the database. Requests that wait on a
// table lock, and requests made while every byte to the database is held,
// are answered 503 with Retry-After within the bound (and some slack), saying
// whether their outcome is unknown; /readyz answers 503 while the database
// is held. When the lock goes, the event whose outcome was unknown in a
// group commit turns out stored, and the one that was not carried out is
// not; when the bytes flow again, or the held connections are reset, posts
// are accepted again.
func TestDatabaseWaitsAreBounded(t *testing.T) {
	t.Parallel()
	// slack is what a request takes besides its waits on the database: on
	// a busy test box, scheduling more than anything.
	const bound, slack = time.Second, 2 * time.Second
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	proxy, err := tcpproxy.Start(u.Host)
	require.NoError(t, err)
	t.Cleanup(proxy.Close)
	u.Host = proxy.Addr()

	cfg := config.Config{DatabaseURL: u.String(), DBTimeout: bound, EncryptionKey: bytes.Repeat([]byte{1}, 32)}
	pool, err := app.OpenPool(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st, err := app.NewStore(pool, cfg)
	require.NoError(t, err)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	keyA, keyB := apikey.New(), apikey.New()
	_, err = st.CreateTenant(ctx, "Acme", "ops@acme.test", apikey.Digest(keyA))
	require.NoError(t, err)
	_, err = st.CreateTenant(ctx, "Globex", "ops@globex.test", apikey.Digest(keyB))
	require.NoError(t, err)
	api := httpapi.New(controltest.New(st, controltest.Options{Nudger: dispatchtest.Nudger(st, jobs.NewQueue(rc))}), httpapi.Config{Ingest: httpapi.StartIngest(t, st, dispatchtest.Nudger(st, jobs.NewQueue(rc))), APIRate: testRate, DBTimeout: bound})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)

	type answer struct {
		status  int
		retry   string
		detail  string
		elapsed time.Duration
	}
	// do may run in goroutines of its own: a transport error is an answer
	// with no status.
	do := func(method, path, key, body string, header map[string]string) answer {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		start := time.Now()
		res, err := srv.Client().Do(req)
		if err != nil {
			return answer{detail: err.Error(), elapsed: time.Since(start)}
		}
		defer res.Body.Close()
		got, err := io.ReadAll(res.Body)
		a := answer{status: res.StatusCode, retry: res.Header.Get("Retry-After"), elapsed: time.Since(start)}
		if err != nil {
			a.status, a.detail = 0, err.Error()
			return a
		}
		var p struct{ Detail string }
		_ = json.Unmarshal(got, &p)
		a.detail = p.Detail
		return a
	}
	event := func(marker string) string {
		return `{"type":"order.created","payload":{"marker":"` + marker + `"}}`
	}
	requireBounded := func(a answer, detail, what string) {
		t.Helper()
		require.Equal(t, http.StatusServiceUnavailable, a.status, "%s: %s", what, a.detail)
		require.Equal(t, "1", a.retry, what)
		require.Contains(t, a.detail, detail, what)
		require.Less(t, a.elapsed, bound+slack, "%s: answered within the bound", what)
	}
	stored := func(marker string) int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE payload->>'marker' = $1`, marker).Scan(&n))
		return n
	}
	// Warm: connections open, the key and the event type cached (a busy
	// test box can make the first request's waits outlast a second).
	require.Eventually(t, func() bool {
		return do("POST", "/v1/events", keyA, event("warm"), nil).status == http.StatusAccepted
	}, 20*time.Second, 10*time.Millisecond)

	// A lock every insert into events waits on, held on a connection of
	// its own.
	admin, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close(context.Background()) })
	tx, err := admin.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `LOCK TABLE events IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)

	const notDone, unknown = "was not carried out", "may or may not have taken effect"
	requireBounded(do("POST", "/v1/events", keyA, event("keyed"), map[string]string{"Idempotency-Key": "k-1"}), notDone,
		"an event with an Idempotency-Key, waiting to insert")
	// A post that finds no commit under way commits on its own, and its
	// statement is abandoned at the bound; one that arrives while that one
	// waits is committed by a group-commit loop, whose commit goes on
	// after its caller has left.
	routedWaits := func() bool { // on the pool: pg_stat_activity is read once a transaction
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%InsertRoutedEvents%'`).Scan(&n)
		return err == nil && n > 0
	}
	alone := make(chan answer, 1)
	go func() { alone <- do("POST", "/v1/events", keyA, event("alone"), nil) }()
	var early *answer
	require.Eventually(t, func() bool {
		select {
		case a := <-alone:
			early = &a
			return true
		default:
		}
		return routedWaits()
	}, 10*time.Second, 10*time.Millisecond, "the first post waits on the lock")
	require.Nil(t, early, "the first post was answered before it waited on the lock")
	requireBounded(do("POST", "/v1/events", keyA, event("grouped"), nil), unknown,
		"an event in the group commit, whose commit is under way")
	requireBounded(<-alone, unknown, "an event committed on its own, whose commit was sent")
	// A small batch is stored by one statement outside a transaction: sent,
	// it is its own commit, and the answer cannot tell whether it got to
	// run.
	requireBounded(do("POST", "/v1/events/batch", keyA, `{"events":[`+event("batch")+`]}`, nil), unknown,
		"a batch, sent as one statement")
	require.NoError(t, tx.Rollback(ctx))
	require.Eventually(t, func() bool { return stored("grouped") == 1 }, 10*time.Second, 20*time.Millisecond,
		"the event whose outcome was unknown is stored once the lock goes")
	require.Zero(t, stored("keyed"), "the event that was not carried out is not stored")
	require.Equal(t, http.StatusAccepted, do("POST", "/v1/events", keyA, event("keyed"), map[string]string{"Idempotency-Key": "k-1"}).status,
		"the retry with the same key is accepted")

	// Every byte to the database held: a partition.
	for _, then := range []func(){proxy.Release, proxy.Reset} {
		proxy.Hold()
		ready := do("GET", "/readyz", "", "", nil)
		require.Equal(t, http.StatusServiceUnavailable, ready.status)
		require.Equal(t, "1", ready.retry)
		require.Less(t, ready.elapsed, bound+slack)
		// Concurrent requests do not queue behind one another's waits.
		answers := make(chan answer, 6)
		for range cap(answers) {
			go func() { answers <- do("POST", "/v1/events", keyA, event("held"), nil) }()
		}
		for range cap(answers) {
			requireBounded(<-answers, "", "one of concurrent events from a tenant whose key is cached")
		}
		requireBounded(do("GET", "/v1/endpoints", keyB, "", nil), notDone, "a read whose key must be looked up")
		then()
		require.Eventually(t, func() bool {
			return do("POST", "/v1/events", keyA, event("after"), nil).status == http.StatusAccepted
		}, 10*time.Second, 50*time.Millisecond, "posts are accepted once the bytes flow again")
		require.Equal(t, http.StatusOK, do("GET", "/readyz", "", "", nil).status)
	}
}

package ingest_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dbwait"
	"github.com/sluice-dev/sluice/internal/ingest"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestPostsWaitForAWriter: while no server takes writes (a planned
// switchover: the old leader shut down, the new one not promoted yet), a
// post is not answered at once: its commit is tried again within the
// request's bound and commits once a server takes writes, every event
// stored once. The database is made read-only for new sessions, so that
// every connection target_session_attrs=read-write makes is refused, as
// a standby refuses it.
func TestPostsWaitForAWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	cfg, err := pgxpool.ParseConfig(url + "&target_session_attrs=read-write")
	require.NoError(t, err)
	store.ConfigurePool(cfg)
	cfg.ConnConfig.Tracer = dbwait.Tracer{}
	// A connection whose backend was terminated is found dead before use,
	// not by the statement it carries (whose outcome would be unknown).
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return true }
	var refused atomic.Int64
	validate := cfg.ConnConfig.ValidateConnect
	cfg.ConnConfig.ValidateConnect = func(ctx context.Context, c *pgconn.PgConn) error {
		err := validate(ctx, c)
		if err != nil {
			refused.Add(1)
		}
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	f := storetest.On(t, pool, pool)
	in := start(t, f, ingest.Config{Committers: 2})

	// A session opened now stays writable to end the outage.
	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	var db string
	require.NoError(t, admin.QueryRow(ctx, `SELECT current_database()`).Scan(&db))
	_, err = in.Submit(ctx, f.TenantA.ID, sluice.NewEvent{Type: "t.before", Payload: []byte(`{}`)})
	require.NoError(t, err)

	// No writer: new sessions are read-only, and every session there was
	// is ended (the old leader shut down).
	_, err = admin.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s SET default_transaction_read_only = on`, db))
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, db)
	require.NoError(t, err)

	const n = 20
	type result struct {
		ev  sluice.Event
		err error
	}
	results := make(chan result, n+2)
	var wg sync.WaitGroup
	post := func(submit func(ctx context.Context) (sluice.Event, error)) {
		wg.Go(func() {
			// As the API bounds a request (dbwait.Bound), generously.
			rctx, stop := dbwait.WithBudget(ctx, 60*time.Second)
			defer stop()
			rctx = dbwait.WatchCommit(rctx)
			done := dbwait.Wait(rctx)
			ev, err := submit(rctx)
			done()
			results <- result{ev, err}
		})
	}
	for i := range n {
		post(func(ctx context.Context) (sluice.Event, error) {
			return in.Submit(ctx, f.TenantA.ID, sluice.NewEvent{Type: "t.during", Payload: fmt.Appendf(nil, `{"i":%d}`, i)})
		})
	}
	post(func(ctx context.Context) (sluice.Event, error) {
		evs, err := in.SubmitBatch(ctx, f.TenantA.ID, []sluice.NewEvent{{Type: "t.during", Payload: []byte(`{"batch":1}`)}})
		if err != nil {
			return sluice.Event{}, err
		}
		return evs[0], nil
	})
	post(func(ctx context.Context) (sluice.Event, error) {
		ev, _, err := in.SubmitIdempotent(ctx, f.TenantA.ID, sluice.NewEvent{Type: "t.during", Payload: []byte(`{"key":1}`), IdempotencyKey: "k1"})
		return ev, err
	})

	// Every kind of post was refused a connection, more than once, and
	// none was answered meanwhile.
	require.Eventually(t, func() bool { return refused.Load() >= 9 }, 30*time.Second, 10*time.Millisecond,
		"posts try again while no server takes writes")
	select {
	case r := <-results:
		t.Fatalf("a post was answered while no server takes writes: %v", r.err)
	default:
	}

	// A writer again.
	_, err = admin.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s RESET default_transaction_read_only`, db))
	require.NoError(t, err)
	wg.Wait()
	close(results)
	for r := range results {
		require.NoError(t, r.err)
		require.Equal(t, "t.during", r.ev.Type)
	}
	var stored, distinct int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*), count(DISTINCT payload::text) FROM events WHERE type = 't.during'`).Scan(&stored, &distinct))
	require.Equal(t, n+2, stored, "every post stored once")
	require.Equal(t, n+2, distinct)
}

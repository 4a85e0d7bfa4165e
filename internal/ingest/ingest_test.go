package ingest_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/ingest"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestConcurrentSubmitsShareCommits posts events from many goroutines and
// checks each comes back as stored, every one is in the table once, and
// they were committed in fewer transactions than events.
func TestConcurrentSubmitsShareCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := storetest.New(t)
	st, pool, tenantA, tenantB := f.Store, f.Store.Pool(), f.TenantA, f.TenantB

	b := start(t, f, ingest.Config{Committers: 2, MaxBatch: 50})
	const n = 400
	var wg sync.WaitGroup
	got := make([]sluice.Event, n)
	for i := range n {
		wg.Go(func() {
			tenant := tenantA.ID
			if i%2 == 1 {
				tenant = tenantB.ID
			}
			ev, err := b.Submit(ctx, tenant, sluice.NewEvent{Type: "t.x", Payload: fmt.Appendf(nil, `{"i":%d}`, i)})
			require.NoError(t, err)
			require.Equal(t, tenant, ev.TenantID)
			got[i] = ev
		})
	}
	wg.Wait()

	for _, tenant := range []sluice.Tenant{tenantA, tenantB} {
		page, err := st.ListEvents(ctx, tenant.ID, nil, nil, sluice.PageParams{Limit: sluice.MaxPageLimit})
		require.NoError(t, err)
		require.Len(t, page.Items, n/2, "each tenant's events, stored under that tenant")
	}
	commits := eventCommits(t, pool, tenantA.ID, tenantB.ID)
	require.Less(t, commits, n, "events shared transactions")
	t.Logf("%d events in %d transactions", n, commits)

	b.Stop()
	_, err := b.Submit(ctx, tenantA.ID, sluice.NewEvent{Type: "t.x", Payload: []byte(`1`)})
	require.ErrorIs(t, err, ingest.ErrClosed, "after Stop")
	_, err = b.SubmitBatch(ctx, tenantA.ID, []sluice.NewEvent{{Type: "t.x", Payload: []byte(`1`)}})
	require.ErrorIs(t, err, ingest.ErrClosed, "after Stop")
}

// TestRejectedEventFailsAlone submits, bypassing the API's validation,
// events that Postgres rejects (invalid UTF-8 inside a JSON string, a NUL
// in the coalesce key) for one tenant while another tenant posts valid
// events, all at once into a single committer so that they share groups.
// Every valid event must be stored and answered as stored; every rejected
// one must fail with an error sluice.RowRejected recognises, which is what
// lets the API answer it with a 4xx rather than a 500.
func TestRejectedEventFailsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := storetest.New(t)
	b := start(t, f, ingest.Config{Committers: 1, MaxBatch: 64})

	rejected := []sluice.NewEvent{
		{Type: "t.bad", Payload: []byte("{\"s\":\"a\xffb\"}")},
		{Type: "t.bad", Payload: []byte(`{}`), CoalesceKey: new("k\x00")},
	}
	const valid, bad = 240, 24
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		ids = map[uuid.UUID]bool{}
	)
	for i := range valid {
		wg.Go(func() {
			ev, err := b.Submit(ctx, f.TenantA.ID, sluice.NewEvent{Type: "t.ok", Payload: fmt.Appendf(nil, `{"i":%d}`, i)})
			require.NoError(t, err)
			mu.Lock()
			ids[ev.ID] = true
			mu.Unlock()
		})
		if i%(valid/bad) == 0 {
			wg.Go(func() {
				_, err := b.Submit(ctx, f.TenantB.ID, rejected[i%len(rejected)])
				require.Error(t, err)
				require.True(t, sluice.RowRejected(err), "a rejected row is recognisable: %v", err)
			})
		}
	}
	wg.Wait()

	require.Len(t, ids, valid)
	rows, err := f.Store.Pool().Query(ctx, `SELECT id FROM events WHERE tenant_id = $1`, f.TenantA.ID)
	require.NoError(t, err)
	var stored int
	for rows.Next() {
		var id uuid.UUID
		require.NoError(t, rows.Scan(&id))
		require.True(t, ids[id], "stored events are the ones answered")
		stored++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, valid, stored, "every valid event is stored")

	var others int
	require.NoError(t, f.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM events WHERE tenant_id = $1`, f.TenantB.ID).Scan(&others))
	require.Zero(t, others, "no rejected event is stored")
	commits := eventCommits(t, f.Store.Pool(), f.TenantA.ID)
	require.Less(t, commits, valid, "events shared commits")
	t.Logf("%d valid events in %d commits", valid, commits)
}

// eventCommits counts the transactions that wrote these tenants' events.
func eventCommits(t *testing.T, pool *pgxpool.Pool, tenants ...uuid.UUID) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(t.Context(),
		`SELECT count(DISTINCT xmin::text) FROM events WHERE tenant_id = ANY($1)`, tenants).Scan(&n))
	return n
}

// TestConfigResolve: defaults fill what is unset, and a negative setting
// is refused when the Ingester is made.
func TestConfigResolve(t *testing.T) {
	t.Parallel()
	nudger := dispatch.NewNudger(nil, nil, dispatch.NudgerConfig{})
	cfg, err := ingest.Config{Nudger: nudger}.Resolve()
	require.NoError(t, err)
	require.Equal(t, ingest.CommittersDefault, cfg.Committers)
	require.Equal(t, ingest.MaxBatchDefault, cfg.MaxBatch)
	require.NotNil(t, cfg.Logger)

	_, err = ingest.New(nil, ingest.Config{Nudger: nudger, Committers: -1})
	require.ErrorContains(t, err, "Committers")
	_, err = ingest.New(nil, ingest.Config{Nudger: nudger, MaxBatch: -1})
	require.ErrorContains(t, err, "MaxBatch")
	_, err = ingest.New(nil, ingest.Config{})
	require.ErrorContains(t, err, "Nudger", "a nil Nudger is a programming error")
}

// TestSubmitBeforeStart: an Ingester takes no event before it is started.
func TestSubmitBeforeStart(t *testing.T) {
	t.Parallel()
	in, err := ingest.New(nil, ingest.Config{Nudger: dispatch.NewNudger(nil, nil, dispatch.NudgerConfig{})})
	require.NoError(t, err)
	_, err = in.Submit(t.Context(), uuid.New(), sluice.NewEvent{Type: "t.x", Payload: []byte(`1`)})
	require.ErrorIs(t, err, ingest.ErrClosed)
	_, err = in.SubmitBatch(t.Context(), uuid.New(), []sluice.NewEvent{{Type: "t.x", Payload: []byte(`1`)}})
	require.ErrorIs(t, err, ingest.ErrClosed)
}

// TestLargeEventCommitsAlone submits large events (over ingest.LargeEvent)
// among many small ones into a single committer, all at once, and checks
// that every event is stored and that each large one has a transaction of
// its own.
func TestLargeEventCommitsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := storetest.New(t)
	b := start(t, f, ingest.Config{Committers: 1, MaxBatch: 50})
	large := append(append([]byte(`{"blob":"`), bytes.Repeat([]byte("0123456789abcdef"), ingest.LargeEvent/16+1)...), `"}`...)
	const small, larges = 60, 4
	var wg sync.WaitGroup
	ids := make([]uuid.UUID, larges)
	errs := make([]error, small+larges)
	for i := range small + larges {
		wg.Go(func() {
			payload := fmt.Appendf(nil, `{"i":%d}`, i)
			if i%(small/larges+1) == 0 && i/(small/larges+1) < larges {
				payload = large
			}
			ev, err := b.Submit(ctx, f.TenantA.ID, sluice.NewEvent{Type: "t.x", Payload: payload})
			errs[i] = err
			if len(payload) > ingest.LargeEvent {
				ids[i/(small/larges+1)] = ev.ID
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	var stored int
	require.NoError(t, f.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM events WHERE tenant_id = $1`, f.TenantA.ID).Scan(&stored))
	require.Equal(t, small+larges, stored)
	for _, id := range ids {
		var sharing int
		require.NoError(t, f.Store.Pool().QueryRow(ctx,
			`SELECT count(*) FROM events WHERE xmin::text = (SELECT xmin::text FROM events WHERE id = $1)`, id).Scan(&sharing))
		require.Equal(t, 1, sharing, "large event %s committed alone", id)
	}
}

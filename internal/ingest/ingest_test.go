package ingest_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/ingest"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/secretbox"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// TestConcurrentSubmitsShareCommits posts events from many goroutines and
// checks each comes back as stored, every one is in the table once, and
// they were committed in fewer transactions (fan-out jobs) than events.
func TestConcurrentSubmitsShareCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	box, err := secretbox.New(bytes.Repeat([]byte{1}, secretbox.KeySize))
	require.NoError(t, err)
	st := store.New(pool, box)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	tenantA, _, err := st.CreateTenant(ctx, "a", "a@a.test")
	require.NoError(t, err)
	tenantB, _, err := st.CreateTenant(ctx, "b", "b@b.test")
	require.NoError(t, err)

	b := ingest.New(st, jobs.NewQueue(rc), ingest.Config{Committers: 2, MaxBatch: 50})
	defer b.Close()
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
		page, err := st.ListEvents(ctx, tenant.ID, nil, sluice.PageParams{Limit: sluice.MaxPageLimit})
		require.NoError(t, err)
		require.Len(t, page.Items, n/2, "each tenant's events, stored under that tenant")
	}
	var jobCount int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'fanout'`).Scan(&jobCount))
	require.Less(t, jobCount, n, "events shared transactions and fan-out jobs")
	t.Logf("%d events in %d transactions", n, jobCount)

	b.Close()
	_, err = b.Submit(ctx, tenantA.ID, sluice.NewEvent{Type: "t.x", Payload: []byte(`1`)})
	require.ErrorIs(t, err, ingest.ErrClosed)
}

package jobs

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
)

func newHolder(t *testing.T, url string) *LeaseHolder {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	h := NewLeaseHolder(LeaseConfig{ConnConfig: cfg, CheckInterval: 50 * time.Millisecond})
	h.Start(context.Background())
	t.Cleanup(h.Close)
	return h
}

// TestLeaseExcludesOtherSessions: a key held by one process's lease
// connection cannot be taken by another until it is released.
func TestLeaseExcludesOtherSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := newHolder(t, url), newHolder(t, url)

	held, err := a.Acquire(ctx, 42)
	require.NoError(t, err)
	require.NoError(t, held.Check())
	_, err = b.Acquire(ctx, 42)
	require.ErrorIs(t, err, ErrLeaseHeld)

	held.Release()
	other, err := b.Acquire(ctx, 42)
	require.NoError(t, err)
	other.Release()
}

// TestLeaseLostWithItsConnection: when the lease connection dies (here its
// backend is terminated, as in a Postgres restart), Postgres frees the key
// at once, and the run that held it learns it has lost it.
func TestLeaseLostWithItsConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := newHolder(t, url), newHolder(t, url)
	held, err := a.Acquire(ctx, 7)
	require.NoError(t, err)

	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer admin.Close(ctx)
	// pg_locks spans the cluster: only this test's database, or the
	// sessions of tests running beside it that hold key 7 go too.
	_, err = admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND objid = 7
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
	require.NoError(t, err)

	require.Eventually(t, func() bool { return held.Check() != nil }, 5*time.Second, 10*time.Millisecond, "the health check notices")
	require.ErrorIs(t, held.Check(), ErrLeaseLost)
	taken, err := b.Acquire(ctx, 7)
	require.NoError(t, err, "the key is free for a successor")
	taken.Release()

	again, err := a.Acquire(ctx, 8)
	require.NoError(t, err, "the holder reconnects for new runs")
	require.NoError(t, again.Check())
}

// TestLeasesTakenTogetherAnswerEachRun: runs that take their keys at the
// same moment share statements, and each learns about its own key: the
// ones another session holds are refused, the others are taken and can be
// given up.
func TestLeasesTakenTogetherAnswerEachRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := newHolder(t, url), newHolder(t, url)
	const n = 300
	for k := int64(1); k <= n; k += 2 {
		_, err := b.Acquire(ctx, k) // the odd keys, held elsewhere
		require.NoError(t, err)
	}

	leases := make([]*Lease, n+1)
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	for k := int64(1); k <= n; k++ {
		wg.Go(func() { leases[k], errs[k] = a.Acquire(ctx, k) })
	}
	wg.Wait()
	for k := int64(1); k <= n; k++ {
		if k%2 == 1 {
			require.ErrorIs(t, errs[k], ErrLeaseHeld, "key %d", k)
			continue
		}
		require.NoError(t, errs[k], "key %d", k)
		require.NoError(t, leases[k].Check())
	}

	for k := int64(2); k <= n; k += 2 {
		wg.Go(leases[k].Release)
	}
	wg.Wait()
	for k := int64(2); k <= n; k += 2 {
		l, err := b.Acquire(ctx, k)
		require.NoError(t, err, "key %d given up", k)
		l.Release()
	}
}

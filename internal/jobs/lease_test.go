package jobs

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/batch"
	"github.com/sluice-dev/sluice/internal/testkit/fakeclock"
	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
)

// newHolder starts a LeaseHolder on the database at url whose checks run
// when the test moves its clock (the holder's first check is waiting when
// it returns).
func newHolder(t *testing.T, url string) (*LeaseHolder, *fakeclock.Clock) {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	clk := fakeclock.New(time.Now())
	h, err := NewLeaseHolder(LeaseConfig{ConnConfig: cfg, Clock: clk})
	require.NoError(t, err)
	h.testSignals.checked.Init(t)
	require.NoError(t, h.Start(context.Background()))
	t.Cleanup(h.Stop)
	require.Equal(t, DefaultLeaseCheckInterval, nextWait(t, clk))
	return h, clk
}

// nextWait returns the next wait the code under test asks clk for.
func nextWait(t *testing.T, clk *fakeclock.Clock) time.Duration {
	t.Helper()
	select {
	case d := <-clk.Waits:
		return d
	case <-time.After(10 * time.Second):
		require.FailNow(t, "nothing waits on the clock")
		return 0
	}
}

func TestLeaseConfigResolve(t *testing.T) {
	t.Parallel()
	_, err := LeaseConfig{}.Resolve()
	require.ErrorContains(t, err, "ConnConfig is required")
	c, err := LeaseConfig{ConnConfig: &pgx.ConnConfig{}}.Resolve()
	require.NoError(t, err)
	require.Equal(t, DefaultLeaseCheckInterval, c.CheckInterval)
	require.Equal(t, SystemClock, c.Clock)
	_, err = LeaseConfig{ConnConfig: &pgx.ConnConfig{}, CheckInterval: -time.Second}.Resolve()
	require.ErrorContains(t, err, "CheckInterval must be positive")
}

// TestLeaseHolderRunsOnlyWhileStarted: runs take leases only while the
// holder runs; stopping it gives up every lease (its connection closes),
// and it can be started again.
func TestLeaseHolderRunsOnlyWhileStarted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	h, err := NewLeaseHolder(LeaseConfig{ConnConfig: cfg, Clock: fakeclock.New(time.Now())})
	require.NoError(t, err)
	_, err = h.Acquire(ctx, 1)
	require.ErrorIs(t, err, batch.ErrClosed, "not started")

	require.NoError(t, h.Start(ctx))
	held, err := h.Acquire(ctx, 1)
	require.NoError(t, err)
	h.Stop()
	require.ErrorIs(t, held.Check(), ErrLeaseLost, "stopping gives every lease up")
	_, err = h.Acquire(ctx, 2)
	require.ErrorIs(t, err, batch.ErrClosed, "stopped")
	other, _ := newHolder(t, url)
	taken, err := other.Acquire(ctx, 1)
	require.NoError(t, err, "the key is free for another session")
	taken.Release()

	require.NoError(t, h.Start(ctx))
	defer h.Stop()
	again, err := h.Acquire(ctx, 1)
	require.NoError(t, err, "started again")
	require.NoError(t, again.Check())
}

// TestLeaseExcludesOtherSessions: a key held by one process's lease
// connection cannot be taken by another until it is released.
func TestLeaseExcludesOtherSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, _ := newHolder(t, url)
	b, _ := newHolder(t, url)

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
	a, clk := newHolder(t, url)
	b, _ := newHolder(t, url)
	held, err := a.Acquire(ctx, 7)
	require.NoError(t, err)

	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer admin.Close(ctx)
	// pg_locks spans the cluster: only this test's database, or the
	// sessions of tests running beside it that hold key 7 go too. The
	// timeout makes the call wait until the backend has exited: its
	// client hears of it before the backend releases its advisory locks,
	// and without the wait the successor below could find key 7 held.
	_, err = admin.Exec(ctx, `SELECT pg_terminate_backend(pid, 10000) FROM pg_locks
		WHERE locktype = 'advisory' AND objid = 7
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
	require.NoError(t, err)

	require.NoError(t, held.Check(), "nothing noticed before the health check")
	clk.Advance(DefaultLeaseCheckInterval)
	a.testSignals.checked.WaitOrTimeout()
	require.ErrorIs(t, held.Check(), ErrLeaseLost, "the health check noticed")
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
	a, _ := newHolder(t, url)
	b, _ := newHolder(t, url)
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

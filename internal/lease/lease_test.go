package lease

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/pgtest"
)

func newHolder(t *testing.T, url string) *Holder {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	h := New(Config{ConnConfig: cfg, CheckInterval: 50 * time.Millisecond})
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
	require.ErrorIs(t, err, ErrHeld)

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
	_, err = admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND objid = 7`)
	require.NoError(t, err)

	require.Eventually(t, func() bool { return held.Check() != nil }, 5*time.Second, 10*time.Millisecond, "the health check notices")
	require.ErrorIs(t, held.Check(), ErrLost)
	taken, err := b.Acquire(ctx, 7)
	require.NoError(t, err, "the key is free for a successor")
	taken.Release()

	again, err := a.Acquire(ctx, 8)
	require.NoError(t, err, "the holder reconnects for new runs")
	require.NoError(t, again.Check())
}

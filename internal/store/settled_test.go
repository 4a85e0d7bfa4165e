package store_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestOneShotRunsWithItsSettingsAlone: a statement run by OneShot sees its
// settings with nothing set beside it (the session carries them), the
// store's own pool does not see them, and the same settings share one
// pool whichever order asked for it first.
func TestOneShotRunsWithItsSettingsAlone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := storetest.New(t)
	settings := [][2]string{{"synchronous_commit", "off"}, {"enable_seqscan", "off"}}
	pool := f.Store.PoolWith(settings)
	require.Same(t, pool, f.Store.PoolWith(settings), "one pool for the same settings")

	var got string
	const read = `SELECT current_setting('synchronous_commit') || ' ' || current_setting('enable_seqscan') || ' ' ||
		(SELECT count(*) FROM pg_settings WHERE name IN ('synchronous_commit', 'enable_seqscan') AND source = 'client')`
	rows, err := f.Store.Pool().Query(ctx, read)
	require.NoError(t, err)
	plain, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, "on on 0", plain, "the store's pool keeps the defaults")

	for range 3 {
		require.NoError(t, pool.QueryRow(ctx, read).Scan(&got))
		require.Equal(t, "off off 2", got, "both settings came with the connection (source client)")
	}
	tx, err := f.Store.BeginStep(ctx, settings)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	require.NoError(t, tx.QueryRow(ctx, read).Scan(&got))
	require.Equal(t, "off off 2", got, "a step on the same settings")
}

// TestBehindPoolerStepsSetTheirSettingsPerTransaction: behind a pooler no
// connection carries settings: OneShot runs on the store's pool, and a
// step sets its settings for its own transaction alone, leaving the
// connection (which a pooler hands to others next) as it found it.
func TestBehindPoolerStepsSetTheirSettingsPerTransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := storetest.New(t)
	cfg := f.Store.Pool().Config()
	cfg.MaxConns = 1 // one connection: what a step leaves behind, the next statement sees
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := store.New(pool, nil)
	st.BehindPooler()
	settings := [][2]string{{"synchronous_commit", "off"}, {"enable_seqscan", "off"}}
	require.Same(t, pool, st.PoolWith(settings), "no settled pool behind a pooler")

	const read = `SELECT current_setting('synchronous_commit') || ' ' || current_setting('enable_seqscan')`
	var got string
	for range 2 {
		tx, err := st.BeginStep(ctx, settings)
		require.NoError(t, err)
		require.NoError(t, tx.QueryRow(ctx, read).Scan(&got))
		require.Equal(t, "off off", got, "the step's transaction has its settings")
		require.NoError(t, tx.Commit(ctx))
		require.NoError(t, pool.QueryRow(ctx, read).Scan(&got))
		require.Equal(t, "on on", got, "the connection is left with the defaults")
	}
	tx, err := st.BeginStep(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, tx.QueryRow(ctx, read).Scan(&got))
	require.Equal(t, "on on", got, "a step without settings sets none")
	require.NoError(t, tx.Rollback(ctx))
}

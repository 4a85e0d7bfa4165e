package store_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

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

package store_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestOneShotSettingHoldsForItsStatementOnly: a statement run by oneShot
// sees its settings, in one transaction with its commit, and the next
// statement on the same connection does not; a failing statement commits
// nothing and leaves the connection usable.
func TestOneShotSettingHoldsForItsStatementOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := storetest.New(t)
	cfg := f.Store.Pool().Config().Copy()
	cfg.MaxConns = 1 // every statement on the same connection
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	db := store.OneShot(pool, [2]string{"synchronous_commit", "off"}, [2]string{"enable_seqscan", "off"})

	setting := func(row pgx.Row) string {
		var v string
		require.NoError(t, row.Scan(&v))
		return v
	}
	require.Equal(t, "off off", setting(db.QueryRow(ctx, `SELECT current_setting('synchronous_commit') || ' ' || current_setting('enable_seqscan')`)))
	require.Equal(t, "on on", setting(pool.QueryRow(ctx, `SELECT current_setting('synchronous_commit') || ' ' || current_setting('enable_seqscan')`)), "gone after it")

	rows, err := db.Query(ctx, `SELECT current_setting('synchronous_commit') FROM generate_series(1, 3)`)
	require.NoError(t, err)
	values, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"off", "off", "off"}, values)
	require.Equal(t, "on", setting(pool.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`)))

	_, err = pool.Exec(ctx, `CREATE TEMP TABLE oneshot (n int CHECK (n < 2))`)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `INSERT INTO oneshot VALUES (1), (2)`)
	require.Error(t, err, "the check fails on the second row")
	_, err = db.Exec(ctx, `INSERT INTO oneshot VALUES (1)`)
	require.NoError(t, err, "the connection is usable again")
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM oneshot`).Scan(&n))
	require.Equal(t, 1, n, "the failed statement committed nothing")
}

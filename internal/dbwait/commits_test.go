package dbwait_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dbwait"
	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
)

// TestCommits checks on a real connection that Tracer marks a watched
// context for a statement outside a transaction that may write (a data-
// modifying CTE among them) and for COMMIT, and not for reads, statements
// inside a transaction or a rollback.
func TestCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	cfg.Tracer = dbwait.Tracer{}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })

	watched := dbwait.WatchCommit(ctx)
	_, err = conn.Exec(watched, "SELECT 1")
	require.NoError(t, err)
	require.False(t, dbwait.CommitSent(watched), "a read commits nothing")
	_, err = conn.Exec(watched, "CREATE TEMP TABLE IF NOT EXISTS dbwait_t (n int)")
	require.NoError(t, err)
	require.True(t, dbwait.CommitSent(watched), "a statement outside a transaction commits")
	watched = dbwait.WatchCommit(ctx)
	_, err = conn.Exec(watched, "-- name: X :exec\nWITH x AS (INSERT INTO dbwait_t VALUES (0) RETURNING n) SELECT * FROM x")
	require.NoError(t, err)
	require.True(t, dbwait.CommitSent(watched), "so does a write hidden in a CTE")

	watched = dbwait.WatchCommit(ctx)
	tx, err := conn.Begin(watched)
	require.NoError(t, err)
	_, err = tx.Exec(watched, "INSERT INTO dbwait_t VALUES (1)")
	require.NoError(t, err)
	require.False(t, dbwait.CommitSent(watched), "nothing sent commits yet")
	require.NoError(t, tx.Commit(watched))
	require.True(t, dbwait.CommitSent(watched))

	watched = dbwait.WatchCommit(ctx)
	err = pgx.BeginFunc(watched, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(watched, "INSERT INTO dbwait_t VALUES (3)"); err != nil {
			return err
		}
		return errors.New("changed my mind")
	})
	require.ErrorContains(t, err, "changed my mind")
	require.False(t, dbwait.CommitSent(watched), "a transaction rolled back commits nothing")
}

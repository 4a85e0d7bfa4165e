package dbwait

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
)

func TestBudgetRunsOutOnlyWhileWaiting(t *testing.T) {
	t.Parallel()
	ctx, stop := WithBudget(context.Background(), 20*time.Millisecond)
	defer stop()
	require.False(t, Exceeded(ctx))
	done := Wait(ctx)
	<-ctx.Done()
	done()
	require.True(t, Exceeded(ctx))
	require.ErrorIs(t, context.Cause(ctx), ErrTimeout)

	// Answered in time: the context ends, but not by the bound.
	ctx, stop = WithBudget(context.Background(), time.Hour)
	Wait(ctx)()
	stop()
	require.ErrorIs(t, ctx.Err(), context.Canceled)
	require.False(t, Exceeded(ctx))

	// Without a budget, Wait does nothing.
	Wait(context.Background())()
}

func TestBoundMiddleware(t *testing.T) {
	t.Parallel()
	h := Bound(10 * time.Millisecond)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		done := Wait(r.Context())
		defer done()
		<-r.Context().Done()
		if Exceeded(r.Context()) && !CommitSent(r.Context()) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
}

func TestFirstWord(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string]string{
		"commit":                                    "commit",
		"-- name: GetX :one\nSELECT 1":              "SELECT",
		"  /* c */ (select 1)":                      "select",
		"-- a\n-- b\nWITH x AS (INSERT ...) SELECT": "WITH",
		"INSERT INTO t VALUES (1);":                 "INSERT",
		"-- only a comment":                         "",
	} {
		require.Equal(t, want, firstWord(sql), sql)
	}
}

// TestCommits checks the classification on a real connection, in and out
// of a transaction, and that Tracer marks a watched context for a write
// outside a transaction and for COMMIT, and not for reads.
func TestCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	cfg.Tracer = Tracer{}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })

	require.False(t, commits(conn, "-- name: X :one\nSELECT 1"))
	require.False(t, commits(conn, "begin"))
	require.True(t, commits(conn, "-- name: X :exec\nINSERT INTO t VALUES (1)"))
	require.True(t, commits(conn, "WITH x AS (DELETE FROM t RETURNING 1) SELECT * FROM x"))

	watched := WatchCommit(ctx)
	_, err = conn.Exec(watched, "SELECT 1")
	require.NoError(t, err)
	require.False(t, CommitSent(watched), "a read commits nothing")
	_, err = conn.Exec(watched, "CREATE TEMP TABLE IF NOT EXISTS dbwait_t (n int)")
	require.NoError(t, err)
	require.True(t, CommitSent(watched), "a statement outside a transaction commits")

	watched = WatchCommit(ctx)
	tx, err := conn.Begin(watched)
	require.NoError(t, err)
	_, err = tx.Exec(watched, "INSERT INTO dbwait_t VALUES (1)")
	require.NoError(t, err)
	require.True(t, commits(conn, "commit"))
	require.False(t, commits(conn, "INSERT INTO dbwait_t VALUES (2)"), "inside a transaction, only COMMIT commits")
	require.False(t, CommitSent(watched), "nothing sent commits yet")
	require.NoError(t, tx.Commit(watched))
	require.True(t, CommitSent(watched))

	watched = WatchCommit(ctx)
	err = pgx.BeginFunc(watched, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(watched, "INSERT INTO dbwait_t VALUES (3)"); err != nil {
			return err
		}
		return errors.New("changed my mind")
	})
	require.ErrorContains(t, err, "changed my mind")
	require.False(t, CommitSent(watched), "a transaction rolled back commits nothing")
}

package dbwait

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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

package store_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
)

// closedPortURL is a database URL on a local port nothing listens on.
func closedPortURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "postgres://sluice@" + addr + "/sluice?sslmode=disable&connect_timeout=2"
}

// TestUnavailable classifies real errors from pgx and Postgres: those of a
// database that cannot be reached are Unavailable, those of a bad
// statement or a missing row are not.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)

	_, refused := pgconn.Connect(ctx, closedPortURL(t))
	pool, err := pgxpool.New(ctx, closedPortURL(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, poolErr := pool.Exec(ctx, "SELECT 1")

	closed, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	require.NoError(t, closed.Close(ctx))
	_, closedErr := closed.Exec(ctx, "SELECT 1")

	victim, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(ctx) })
	_, err = admin.Exec(ctx, "SELECT pg_terminate_backend($1)", victim.PgConn().PID())
	require.NoError(t, err)
	_, terminated := victim.Exec(ctx, "SELECT 1")

	sleeper, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sleeper.Close(ctx) })
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, slow := sleeper.Exec(short, "SELECT pg_sleep(2)")

	_, divByZero := admin.Exec(ctx, "SELECT 1/0")
	_, badText := admin.Exec(ctx, "SELECT $1::text", "a\x00b")
	gone, stop := context.WithCancel(ctx)
	stop()

	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"connection refused":      {refused, true},
		"pool cannot connect":     {poolErr, true},
		"conn closed":             {closedErr, true},
		"backend terminated":      {terminated, true},
		"query past its deadline": {slow, true},
		"wrapped":                 {fmt.Errorf("create event: %w", poolErr), true},
		"too many connections":    {&pgconn.PgError{Code: "53300"}, true},
		"cannot connect now":      {&pgconn.PgError{Code: "57P03"}, true},
		"connection failure":      {&pgconn.PgError{Code: "08006"}, true},
		"division by zero":        {divByZero, false},
		"NUL in text":             {badText, false},
		"no rows":                 {pgx.ErrNoRows, false},
		"not found":               {sluice.ErrNotFound, false},
		"client went away":        {gone.Err(), false},
		"other":                   {errors.New("boom"), false},
		"nil":                     {nil, false},
	} {
		if tc.want {
			require.Error(t, tc.err, name)
		}
		require.Equal(t, tc.want, sluice.Unavailable(tc.err), "%s: %v", name, tc.err)
	}
}

package app_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
)

// TestPoolDropsReadOnlyConnections: a connection whose server says it no
// longer takes writes (here one session set read-only, as a server fenced
// or demoted says to every session) is dropped before it is used again,
// and the next acquire gets a new, writable one.
func TestPoolDropsReadOnlyConnections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := app.OpenPool(ctx, config.Config{DatabaseURL: pgtest.NewDatabase(t), DBTimeout: config.DefaultDBTimeout,
		EncryptionKey: bytes.Repeat([]byte{1}, 32)})
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	// Each acquired connection is released before any check can stop the
	// test: pool.Close waits for every connection to come back.
	var pid uint32
	func() {
		c, err := pool.Acquire(ctx)
		require.NoError(t, err)
		defer c.Release()
		pid = c.Conn().PgConn().PID()
		_, err = c.Exec(ctx, "SET default_transaction_read_only = on")
		require.NoError(t, err)
		require.Equal(t, "on", c.Conn().PgConn().ParameterStatus("default_transaction_read_only"), "the server reports it")
	}()

	idle := pool.AcquireAllIdle(ctx)
	for _, c := range idle {
		require.NotEqual(t, pid, c.Conn().PgConn().PID(), "the read-only connection is not kept")
	}
	for _, c := range idle {
		c.Release()
	}
	c, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer c.Release()
	var ro string
	require.NoError(t, c.QueryRow(ctx, "SHOW transaction_read_only").Scan(&ro))
	require.Equal(t, "off", ro)
}

// TestPoolBehindPoolerPreparesNothing: with a session URL set, the pool
// on DATABASE_URL (a pooler) caches statement descriptions instead of
// named prepared statements, unless its URL chose a mode itself; the
// session pool, straight to Postgres, keeps pgx's default.
func TestPoolBehindPoolerPreparesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	for _, c := range []struct {
		name, url, session string
		want               pgx.QueryExecMode
	}{
		{"no session URL", url, "", pgx.QueryExecModeCacheStatement},
		{"a session URL", url, url, pgx.QueryExecModeCacheDescribe},
		{"a mode of its own", url + "&default_query_exec_mode=exec", url, pgx.QueryExecModeExec},
	} {
		cfg := config.Config{DatabaseURL: c.url, DatabaseSessionURL: c.session, DBTimeout: config.DefaultDBTimeout}
		pool, err := app.OpenPool(ctx, cfg)
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, pool.Config().ConnConfig.DefaultQueryExecMode, c.name)
		pool.Close()
		session, err := app.OpenSessionPool(ctx, cfg)
		require.NoError(t, err, c.name)
		require.Equal(t, pgx.QueryExecModeCacheStatement, session.Config().ConnConfig.DefaultQueryExecMode, c.name+": the session pool")
		session.Close()
	}
}

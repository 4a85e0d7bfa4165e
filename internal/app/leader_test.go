package app_test

import (
	"bytes"
	"context"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
	"github.com/sluice-dev/sluice/internal/testkit/tcpproxy"
)

// leaderSetup is a database reached two ways, as two hosts of one
// DATABASE_URL: first through a proxy (the "old primary"), then directly.
type leaderSetup struct {
	url    string // both hosts, target_session_attrs=read-write
	proxy  string // the first host's address
	direct string
	cfg    config.Config
}

func setupLeader(t *testing.T) leaderSetup {
	t.Helper()
	u, err := url.Parse(pgtest.NewDatabase(t))
	require.NoError(t, err)
	proxy, err := tcpproxy.Start(u.Host)
	require.NoError(t, err)
	t.Cleanup(proxy.Close)
	s := leaderSetup{proxy: proxy.Addr(), direct: u.Host}
	u.Host = s.proxy + "," + s.direct
	q := u.Query()
	q.Set("target_session_attrs", "read-write")
	u.RawQuery = q.Encode()
	s.url = u.String()
	s.cfg = config.Config{DatabaseURL: s.url, DBTimeout: config.DefaultDBTimeout, EncryptionKey: bytes.Repeat([]byte{1}, 32)}
	return s
}

// remote is the address a pooled connection goes to.
func remote(t *testing.T, ctx context.Context, acquire func(context.Context) (*pgconn.PgConn, func(), error)) string {
	t.Helper()
	c, release, err := acquire(ctx)
	require.NoError(t, err)
	defer release()
	return c.Conn().RemoteAddr().String()
}

// TestPoolLeavesAPrimaryLeftBehind: while the first host is a good
// primary the pool's connections go there and its checks leave them be;
// once it is left behind (here: said so for connections through the
// proxy, on top of the real check, which the database passes), the watch
// drops the pool's connections, cuts one in use meanwhile, and new ones go
// to the other host.
func TestPoolLeavesAPrimaryLeftBehind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setupLeader(t)
	var left atomic.Bool
	checks := make(chan struct{}, 1000)
	stranded := func(ctx context.Context, c *pgconn.PgConn) (bool, error) {
		real, err := app.StrandedByReplication(ctx, c)
		select {
		case checks <- struct{}{}:
		default:
		}
		return real || left.Load() && c.Conn().RemoteAddr().String() == s.proxy, err
	}
	pool, resets := app.WatchLeader(t, s.cfg, stranded, 10*time.Millisecond)
	acquire := func(ctx context.Context) (*pgconn.PgConn, func(), error) {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return nil, nil, err
		}
		return c.Conn().PgConn(), c.Release, nil
	}
	require.Equal(t, s.proxy, remote(t, ctx, acquire), "the first host, while it is a good primary")

	held, err := pool.Acquire(ctx)
	require.NoError(t, err)
	heldPID := held.Conn().PgConn().PID()
	for range 5 { // the watch checks and leaves the pool be
		waitFor(t, checks)
	}
	require.Empty(t, resets, "no reset while the server is a good primary")

	left.Store(true)
	waitFor(t, resets)
	_, err = held.Exec(ctx, "SELECT 1")
	require.Error(t, err, "a connection in use meanwhile is cut")
	held.Release()
	c, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer c.Release()
	require.Equal(t, s.direct, c.Conn().PgConn().Conn().RemoteAddr().String(), "new connections go to the other host")
	require.NotEqual(t, heldPID, c.Conn().PgConn().PID())
	var one int
	require.NoError(t, c.QueryRow(ctx, "SELECT 1").Scan(&one))
}

// strandedProxy is a check that says, once left is set, that the
// server behind the proxy was left behind, and counts the checks made on
// connections to it.
func strandedProxy(s leaderSetup, left *atomic.Bool, proxyChecks *atomic.Int64) func(context.Context, *pgconn.PgConn) (bool, error) {
	return func(ctx context.Context, c *pgconn.PgConn) (bool, error) {
		real, err := app.StrandedByReplication(ctx, c)
		onProxy := c.Conn().RemoteAddr().String() == s.proxy
		if onProxy {
			proxyChecks.Add(1)
		}
		return real || left.Load() && onProxy, err
	}
}

// TestPoolTriesTheLeaderFirst: once the first host is left behind, the
// pool's new connections, opened many at once as after a failover, go
// straight to the host that took the last one instead of each first
// starting a backend on the server left behind to be refused there.
func TestPoolTriesTheLeaderFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setupLeader(t)
	var left atomic.Bool
	var proxyChecks atomic.Int64
	pool, resets := app.WatchLeader(t, s.cfg, strandedProxy(s, &left, &proxyChecks), 10*time.Millisecond)
	c, err := pool.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, s.proxy, c.Conn().PgConn().Conn().RemoteAddr().String(), "the first host, while it is a good primary")
	c.Release()

	left.Store(true)
	waitFor(t, resets)
	before := proxyChecks.Load()
	const n = 10
	held := make([]*pgxpool.Conn, 0, n)
	got := make(chan *pgxpool.Conn, n)
	for range n {
		go func() {
			c, err := pool.Acquire(ctx)
			assert.NoError(t, err)
			got <- c
		}()
	}
	for range n {
		held = append(held, <-got)
	}
	for _, c := range held {
		require.NotNil(t, c)
		require.Equal(t, s.direct, c.Conn().PgConn().Conn().RemoteAddr().String())
		c.Release()
	}
	require.Equal(t, before, proxyChecks.Load(), "no new connection tried the server left behind")
}

// TestNewConnectionCutsAPrimaryLeftBehind: the watch's own check is not
// due (an hour away), and a connection is in use on the first host when
// it is left behind. The next connection the pool opens is refused there;
// that alone cuts the one in use at once and resets the pool, and the new
// connection goes to the other host.
func TestNewConnectionCutsAPrimaryLeftBehind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setupLeader(t)
	var left atomic.Bool
	var proxyChecks atomic.Int64
	pool, resets := app.WatchLeader(t, s.cfg, strandedProxy(s, &left, &proxyChecks), time.Hour)
	held, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer held.Release() // on failure too: the pool closes only once it is back
	require.Equal(t, s.proxy, held.Conn().PgConn().Conn().RemoteAddr().String())

	left.Store(true)
	pool.Reset() // no idle connection left: the next is a new one (held is not closed)
	c, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer c.Release()
	require.Equal(t, s.direct, c.Conn().PgConn().Conn().RemoteAddr().String(), "the new connection goes to the other host")
	_, err = held.Exec(ctx, "SELECT 1")
	require.Error(t, err, "the connection in use on the server left behind is cut")
	waitFor(t, resets)
}

// TestPoolWithOneHostIsNotChecked: with a single host there is nowhere
// else to go: even a server said to be left behind is connected to.
func TestPoolWithOneHostIsNotChecked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := app.OpenPool(ctx, config.Config{DatabaseURL: pgtest.NewDatabase(t), DBTimeout: config.DefaultDBTimeout,
		EncryptionKey: bytes.Repeat([]byte{1}, 32)})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.Nil(t, pool.Config().ConnConfig.ValidateConnect, "no check on connecting")

	c, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer c.Release()
	left, err := app.StrandedByReplication(ctx, c.Conn().PgConn())
	require.NoError(t, err)
	require.False(t, left, "a server with no synchronous standby set is not left behind")
}

// waitFor waits for a signal on ch, for at most 10 s.
func waitFor(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no signal within 10s")
	}
}

package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A primary left behind: an HA manager (Patroni) whose agent on the
// primary dies elects a new leader among the standbys, but nothing stops
// the old primary's Postgres (only a watchdog would). It still says it
// takes writes, so target_session_attrs=read-write keeps choosing it and
// the pool keeps its connections there; yet every commit on it waits for
// a synchronous standby that now follows the new leader, for ever.
//
// Sluice tells such a server by what it says about itself: commits wait
// for a synchronous standby (synchronous_standby_names is set) and none is
// connected (no WAL sender). When DATABASE_URL names more than one host,
// a new connection to such a server is refused (the next host is tried),
// and the pool checks, every LeaderCheckInterval, the server its
// connections go to, dropping them all when it is left behind (the idle
// ones with pgxpool.Pool.Reset, and every other socket to it closed: those
// in use wait on commits that never end): new ones go to the host that
// takes writes now. With one
// host there is nowhere else to go and nothing is checked.
// docs/patroni.md has the watchdog that keeps this from happening.

// connSet is every socket the process opened to the database from the
// pool's configuration: the pool's connections and the ones that copy it
// (River's listener, the dispatch leases, the wake-up listener), so that
// those in use (a commit waiting on the server left behind, which
// pgxpool.Pool.Reset only closes once released, and it never is; a lease
// or a LISTEN there) can be cut.
type connSet struct {
	mu    sync.Mutex
	conns map[*trackedConn]struct{}
}

type trackedConn struct {
	net.Conn
	set  *connSet
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.set.mu.Lock()
		delete(c.set.conns, c)
		c.set.mu.Unlock()
	})
	return c.Conn.Close() //nolint:wrapcheck // a net.Conn's own error, as net.Conn.Close returns it
}

// dial wraps dial so that every socket it opens is in s until closed.
func (s *connSet) dial(dial pgconn.DialFunc) pgconn.DialFunc {
	s.conns = map[*trackedConn]struct{}{}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, set: s}
		s.mu.Lock()
		s.conns[tc] = struct{}{}
		s.mu.Unlock()
		return tc, nil
	}
}

// cut closes every socket to server: whatever waits on one fails at once
// (a request's commit with its outcome unknown, as dbwait reports it).
func (s *connSet) cut(server string) int {
	s.mu.Lock()
	var to []*trackedConn
	for c := range s.conns {
		if c.RemoteAddr().String() == server {
			to = append(to, c)
		}
	}
	s.mu.Unlock()
	for _, c := range to {
		_ = c.Close()
	}
	return len(to)
}

// LeaderCheckInterval is how often a pool given several hosts checks
// whether its server was left behind: one statement a second, on one
// connection, whatever the load.
const LeaderCheckInterval = time.Second

// strandedQuery is true on a server whose commits wait for a synchronous
// standby while none is connected. pg_stat_replication shows its rows
// (if only their pid) to any role.
const strandedQuery = `SELECT current_setting('synchronous_standby_names') <> '' AND NOT EXISTS (SELECT 1 FROM pg_stat_replication)`

// errLeftBehind refuses a connection to a server left behind.
var errLeftBehind = errors.New("server waits for a synchronous standby and none is connected: it is no longer the leader")

// strandedFunc reports whether the server of c was left behind.
type strandedFunc func(ctx context.Context, c *pgconn.PgConn) (bool, error)

// strandedByReplication is the strandedFunc of a real server: strandedQuery.
func strandedByReplication(ctx context.Context, c *pgconn.PgConn) (bool, error) {
	res, err := c.Exec(ctx, strandedQuery).ReadAll()
	if err != nil {
		return false, fmt.Errorf("check for a synchronous standby: %w", err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 1 {
		return false, errors.New("check for a synchronous standby: unexpected answer")
	}
	return string(res[0].Rows[0][0]) == "t", nil
}

// severalHosts reports whether cc names more than one host (the fallbacks
// also hold one host's TLS and plain-text attempts).
func severalHosts(cc *pgconn.Config) bool {
	for _, fb := range cc.Fallbacks {
		if fb.Host != cc.Host || fb.Port != cc.Port {
			return true
		}
	}
	return false
}

// refuseLeftBehind makes cc refuse, after its own checks
// (target_session_attrs), a server that stranded says was left behind.
func refuseLeftBehind(cc *pgconn.Config, stranded strandedFunc) {
	validate := cc.ValidateConnect
	cc.ValidateConnect = func(ctx context.Context, c *pgconn.PgConn) error {
		if validate != nil {
			if err := validate(ctx, c); err != nil {
				return err
			}
		}
		left, err := stranded(ctx, c)
		if err != nil {
			return err
		}
		if left {
			return errLeftBehind
		}
		return nil
	}
}

// leaderWatch drops a pool's connections once their server was left
// behind.
type leaderWatch struct {
	pool     *pgxpool.Pool
	stranded strandedFunc
	interval time.Duration
	timeout  time.Duration // of one check (the database bound)
	conns    *connSet      // the pool's; nil: only idle connections are dropped
	logger   *slog.Logger
	reset    func() // called after each reset (tests); nil: none
}

// run checks every interval until ctx ends.
func (w leaderWatch) run(ctx context.Context) {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		server, left, err := w.check(ctx)
		if err != nil || !left {
			// A server that does not answer is the pool's keepalives' and
			// the requests' bounds' to deal with.
			continue
		}
		w.pool.Reset()
		cut := 0
		if w.conns != nil {
			cut = w.conns.cut(server)
		}
		w.logger.Warn("database: the server this process is connected to is no longer the leader (it waits for a synchronous standby and none is connected); reconnecting to the host that takes writes now",
			"server", server, "connections_cut", cut)
		if w.reset != nil {
			w.reset()
		}
	}
}

// check runs stranded on one of the pool's connections.
func (w leaderWatch) check(ctx context.Context) (server string, left bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	c, err := w.pool.Acquire(ctx)
	if err != nil {
		return "", false, fmt.Errorf("acquire: %w", err)
	}
	defer c.Release()
	pc := c.Conn().PgConn()
	server = pc.Conn().RemoteAddr().String()
	left, err = w.stranded(ctx, pc)
	return server, left, err
}

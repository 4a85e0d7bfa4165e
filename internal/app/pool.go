package app

import (
	"context"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/dbwait"
)

// How a connection to Postgres that died is noticed (docs/database.md).
// Every connection Sluice opens is made with these: the pool's, River's
// (it uses the pool), the dispatch leases' and the wake-up listener's
// (they copy its ConnConfig, or the session pool's, set up alike:
// session.go).
const (
	// DefaultConnectTimeout bounds opening one connection, TLS and
	// authentication included, to each host DATABASE_URL lists, unless its
	// connect_timeout says otherwise. Not much shorter: a server that has
	// just seen hundreds of connections reset can take seconds to accept
	// new ones, and attempts abandoned sooner only add to its load, so
	// that none ever succeeds (make faults, partition).
	DefaultConnectTimeout = 10 * time.Second
	// TCP keepalives probe an idle connection after keepAliveIdle, then
	// every keepAliveInterval, and drop it after keepAliveCount
	// unanswered probes: a server that vanished is noticed within about
	// 11 s even by a connection that only listens.
	keepAliveIdle     = 5 * time.Second
	keepAliveInterval = 2 * time.Second
	keepAliveCount    = 3
	// TCPUserTimeout (TCP_USER_TIMEOUT, Linux) drops a connection whose
	// data has gone unacknowledged this long: a statement sent to a server
	// that vanished fails then, instead of after the kernel's retransmission
	// limit (about 15 minutes).
	TCPUserTimeout = 10 * time.Second
)

// configurePool sets the pool's bounds on a database that stops answering
// and its hold on a primary that moves; stranded tells a primary left
// behind (leader.go). With several hosts it returns the set the sockets
// are tracked in (nil with one).
func configurePool(pcfg *pgxpool.Config, cfg config.Config, stranded strandedFunc) *connSet {
	cc := pcfg.ConnConfig
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = DefaultConnectTimeout
	}
	d := &net.Dialer{
		Timeout: cc.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount,
		},
		Control: setUserTimeout(TCPUserTimeout),
	}
	cc.DialFunc = d.DialContext
	// With several hosts, a primary left behind by its HA manager is
	// refused (leader.go), and every socket is tracked so that those to
	// it can be cut; the lease and listener connections copy this.
	var conns *connSet
	if severalHosts(&cc.Config) {
		conns = newConnSet()
		refuseLeftBehind(&cc.Config, stranded, conns)
		cc.DialFunc = conns.dial(cc.DialFunc)
		cc.LookupFunc = conns.order.lookup(cc.LookupFunc)
		// The pool's new connections try the host that took the last one
		// first (leader.go); the lease and listener connections, a few
		// per process, go in the URL's order.
		before := pcfg.BeforeConnect
		pcfg.BeforeConnect = func(ctx context.Context, c *pgx.ConnConfig) error {
			conns.order.sort(&c.Config)
			if before != nil {
				return before(ctx, c)
			}
			return nil
		}
	}
	// A connection idle for over a second is pinged before use; a ping
	// the server does not answer within the bound drops it, whatever the
	// acquiring context (a bounded API request stops waiting sooner).
	pcfg.PingTimeout = cfg.DBTimeout
	// A server that became a standby, or was fenced read-only, tells its
	// connected clients (in_hot_standby, default_transaction_read_only);
	// such connections are dropped when next acquired rather than reused,
	// and new ones go to the host that is primary now
	// (target_session_attrs=read-write). The check is made on acquiring
	// only: pgxpool runs an AfterRelease hook on a goroutine of its own for
	// every release, a thread woken per statement at a trickle.
	prepare := pcfg.PrepareConn
	pcfg.PrepareConn = func(ctx context.Context, c *pgx.Conn) (bool, error) {
		if !writable(c) {
			return false, nil
		}
		if prepare != nil {
			return prepare(ctx, c)
		}
		return true, nil
	}
	// Requests bounded by dbwait learn whether a commit was sent for them.
	if cc.Tracer == nil {
		cc.Tracer = dbwait.Tracer{}
	} else {
		cc.Tracer = multitracer.New(cc.Tracer, dbwait.Tracer{})
	}
	return conns
}

// writable reports whether c's server last said it takes writes.
func writable(c *pgx.Conn) bool {
	pc := c.PgConn()
	return pc.ParameterStatus("in_hot_standby") != "on" && pc.ParameterStatus("default_transaction_read_only") != "on"
}

package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
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
//
// Each new connection tries the hosts in an order the pool keeps
// (hostOrder): the host a connection was last made to first, the hosts
// that refused one (a standby, a server left behind) last. When a primary
// is left, every process opens its whole pool again at once; tried in the
// URL's order, each connection would first start a backend on the server
// left behind and on a standby, only to be refused there, and on a busy
// machine the new leader then answers the first of them seconds late.
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
	order *hostOrder // the order the pool's new connections try the hosts in
	// left carries what new connections found left behind to the watch.
	left chan leftBehind
}

// newConnSet is an empty connSet, with its host order.
func newConnSet() *connSet {
	return &connSet{order: new(hostOrder), left: make(chan leftBehind, 1)}
}

type trackedConn struct {
	net.Conn
	set  *connSet
	addr string // as dialled: host:port from the configuration
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
		tc := &trackedConn{Conn: c, set: s, addr: addr}
		s.mu.Lock()
		s.conns[tc] = struct{}{}
		s.mu.Unlock()
		return tc, nil
	}
}

// cut closes every socket to server: whatever waits on one fails at once
// (a request's commit with its outcome unknown, as dbwait reports it).
func (s *connSet) cut(server string) int { return s.cutBut(server, nil) }

// cutBut is cut sparing the socket but (nil: none).
func (s *connSet) cutBut(server string, but net.Conn) int {
	s.mu.Lock()
	var to []*trackedConn
	for c := range s.conns {
		if c.RemoteAddr().String() == server && net.Conn(c) != but {
			to = append(to, c)
		}
	}
	s.mu.Unlock()
	for _, c := range to {
		_ = c.Close()
	}
	return len(to)
}

// leftBehind is what a new connection learnt: server (a remote address)
// was left behind, and cut sockets to it were cut.
type leftBehind struct {
	server string
	cut    int
}

// found reports a server a new connection found left behind: every other
// socket to it is cut at once, and the watch, if it had any, resets the
// pool. The periodic check looks at one connection; this is every new
// connection's check, so that those in use on a server left behind are
// cut even when the one the watch took went to the new leader.
func (s *connSet) found(server string, conn net.Conn) {
	n := s.cutBut(server, trackedOf(conn))
	if n == 0 || s.left == nil {
		return
	}
	select {
	case s.left <- leftBehind{server: server, cut: n}:
	default: // a reset is on its way already
	}
}

// trackedOf is the connSet's socket under c (TLS wraps it), or c.
func trackedOf(c net.Conn) net.Conn {
	for nc := c; nc != nil; {
		if tc, ok := nc.(*trackedConn); ok {
			return tc
		}
		u, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		nc = u.NetConn()
	}
	return c
}

// LeaderCheckInterval is how often a pool given several hosts checks
// whether its server was left behind: one statement a second, on one
// connection, whatever the load.
const LeaderCheckInterval = time.Second

// strandedQuery reads what a server says of itself that tells a leader
// left behind (leaderState, in its columns' order). pg_stat_replication
// shows its rows (if only their pid) to any role.
// pg_last_xact_replay_timestamp() is, on a primary, the time of the last
// transaction it replayed as a standby before its promotion, and NULL on
// one never in recovery since it started. Ages are the server's own
// (now() less each time), so no clock but its own counts.
const strandedQuery = `SELECT pg_is_in_recovery(),
    current_setting('synchronous_standby_names') <> '',
    EXISTS (SELECT 1 FROM pg_stat_replication),
    extract(epoch FROM now() - pg_last_xact_replay_timestamp()),
    extract(epoch FROM now() - pg_postmaster_start_time())`

// PromotedGrace is how long after its promotion (or its start) a primary
// without a synchronous standby is not taken for one left behind: long
// enough for the other nodes to follow it (a Patroni loop_wait, 10 s by
// default, and their reconnection). A leader left behind that was
// promoted less than this before is left this much later.
const PromotedGrace = 30 * time.Second

// leaderState is what strandedQuery reads of a server.
type leaderState struct {
	InRecovery       bool // a standby: target_session_attrs refuses it
	WaitsForStandby  bool // synchronous_standby_names is set: commits wait for a synchronous standby
	StandbyConnected bool // a WAL sender runs: a standby streams from it
	// Replayed: it replayed a transaction as a standby since it started,
	// SinceReplay ago; so it was promoted since, and no earlier.
	Replayed    bool
	SinceReplay time.Duration
	Uptime      time.Duration // since its postmaster started
}

// isStranded reports whether a server in state s was left behind: a
// primary whose commits wait for a synchronous standby while none is
// connected, and that neither was promoted nor started within grace. A
// leader just promoted has no standby of its own either until the others
// follow it (Patroni's next loop, then their reconnection), and one just
// restarted none until they reconnect; its commits wait meanwhile, but it
// is the leader, and what does not wait for a standby (the attempts
// dispatch records, reads) goes on there. At exactly grace it is still
// given the benefit.
func isStranded(s leaderState, grace time.Duration) bool {
	switch {
	case s.InRecovery, !s.WaitsForStandby, s.StandbyConnected:
		return false
	case s.Replayed && s.SinceReplay <= grace:
		return false // promoted moments ago
	case s.Uptime <= grace:
		return false // started moments ago
	default:
		return true
	}
}

// errLeftBehind refuses a connection to a server left behind.
var errLeftBehind = errors.New("server waits for a synchronous standby and none is connected: it is no longer the leader")

// strandedFunc reports whether the server of c was left behind.
type strandedFunc func(ctx context.Context, c *pgconn.PgConn) (bool, error)

// strandedByReplication is the strandedFunc of a real server:
// strandedQuery, judged by isStranded.
func strandedByReplication(ctx context.Context, c *pgconn.PgConn) (bool, error) {
	res, err := c.Exec(ctx, strandedQuery).ReadAll()
	if err != nil {
		return false, fmt.Errorf("check for a synchronous standby: %w", err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 {
		return false, errors.New("check for a synchronous standby: unexpected answer")
	}
	s, err := parseLeaderState(res[0].Rows[0])
	if err != nil {
		return false, fmt.Errorf("check for a synchronous standby: %w", err)
	}
	return isStranded(s, PromotedGrace), nil
}

// parseLeaderState reads strandedQuery's row, in text format.
func parseLeaderState(row [][]byte) (leaderState, error) {
	if len(row) != 5 {
		return leaderState{}, fmt.Errorf("%d columns, not 5", len(row))
	}
	s := leaderState{
		InRecovery: string(row[0]) == "t", WaitsForStandby: string(row[1]) == "t", StandbyConnected: string(row[2]) == "t",
		Replayed: row[3] != nil,
	}
	var err error
	if s.Replayed {
		if s.SinceReplay, err = seconds(row[3]); err != nil {
			return s, fmt.Errorf("since the last replay: %w", err)
		}
	}
	if s.Uptime, err = seconds(row[4]); err != nil {
		return s, fmt.Errorf("uptime: %w", err)
	}
	return s, nil
}

// seconds reads a number of seconds as Postgres writes it.
func seconds(b []byte) (time.Duration, error) {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return 0, fmt.Errorf("seconds: %w", err)
	}
	return time.Duration(f * float64(time.Second)), nil
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
// (target_session_attrs), a server that stranded says was left behind,
// and cut every other socket of conns to it; conns' order learns which
// host took the connection and which refused it.
func refuseLeftBehind(cc *pgconn.Config, stranded strandedFunc, conns *connSet) {
	order := conns.order
	validate := cc.ValidateConnect
	cc.ValidateConnect = func(ctx context.Context, c *pgconn.PgConn) error {
		addr := dialedAddr(c.Conn())
		if validate != nil {
			if err := validate(ctx, c); err != nil {
				order.refused(addr)
				return err
			}
		}
		left, err := stranded(ctx, c)
		if err != nil {
			return err
		}
		if left {
			order.refused(addr)
			conns.found(c.Conn().RemoteAddr().String(), c.Conn())
			return errLeftBehind
		}
		order.took(addr)
		return nil
	}
}

// dialedAddr is the address c was dialled at (host:port as configured),
// or its remote address if it was not dialled through a connSet.
func dialedAddr(c net.Conn) string {
	if tc, ok := trackedOf(c).(*trackedConn); ok {
		return tc.addr
	}
	return c.RemoteAddr().String()
}

// hostOrder is the order in which a pool's new connections try the hosts
// of a multi-host URL: the host the last connection was made to, then the
// others in the URL's order, then those that last refused a connection
// (not writable, or left behind), least recently refused first. A host
// that takes a connection again is simply first again.
// Hosts are known as the URL names them (host:port): a name's addresses
// are mapped back to it as they are looked up.
type hostOrder struct {
	mu      sync.Mutex
	leader  string
	refusal map[string]uint64 // host → when it last refused (a counter)
	n       uint64
	names   map[string]string // an address looked up → the host name
}

// lookup wraps a pgconn.LookupFunc so that the addresses it returns are
// known by their host's name.
func (o *hostOrder) lookup(lookup pgconn.LookupFunc) pgconn.LookupFunc {
	return func(ctx context.Context, host string) ([]string, error) {
		addrs, err := lookup(ctx, host)
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.names == nil {
			o.names = map[string]string{}
		}
		for _, a := range addrs {
			if ip, _, err := net.SplitHostPort(a); err == nil {
				a = ip
			}
			if a != host {
				o.names[a] = host
			}
		}
		return addrs, err //nolint:wrapcheck // pgconn's own lookup, passed through
	}
}

// key is the host:port a dialled address stands for. o.mu is held.
func (o *hostOrder) key(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr // a Unix socket
	}
	if name, ok := o.names[host]; ok {
		return net.JoinHostPort(name, port)
	}
	return addr
}

func (o *hostOrder) took(addr string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	addr = o.key(addr)
	o.leader = addr
	delete(o.refusal, addr)
}

func (o *hostOrder) refused(addr string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	addr = o.key(addr)
	if o.leader == addr {
		o.leader = ""
	}
	if o.refusal == nil {
		o.refusal = map[string]uint64{}
	}
	o.n++
	o.refusal[addr] = o.n
}

// rank orders addr: the leader first (0), hosts never refused next (1),
// then the refused ones by when they refused.
func (o *hostOrder) rank(addr string) uint64 {
	if addr == o.leader {
		return 0
	}
	if at, ok := o.refusal[addr]; ok {
		return 1 + at
	}
	return 1
}

// sort puts cc's hosts (the first and its fallbacks) in the order, keeping
// the URL's order among equals and each host's own attempts (TLS, then
// plain text) together.
func (o *hostOrder) sort(cc *pgconn.Config) {
	hosts := append([]*pgconn.FallbackConfig{{Host: cc.Host, Port: cc.Port, TLSConfig: cc.TLSConfig}}, cc.Fallbacks...)
	o.mu.Lock()
	rank := make(map[*pgconn.FallbackConfig]uint64, len(hosts))
	for _, h := range hosts {
		rank[h] = o.rank(hostAddr(h))
	}
	o.mu.Unlock()
	slices.SortStableFunc(hosts, func(a, b *pgconn.FallbackConfig) int { return cmp.Compare(rank[a], rank[b]) })
	cc.Host, cc.Port, cc.TLSConfig = hosts[0].Host, hosts[0].Port, hosts[0].TLSConfig
	cc.Fallbacks = hosts[1:]
}

// hostAddr is the address pgconn dials for h (pgconn.NetworkAddress): a
// Unix socket's path, or host:port.
func hostAddr(h *pgconn.FallbackConfig) string {
	_, addr := pgconn.NetworkAddress(h.Host, h.Port)
	return addr
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
	var found <-chan leftBehind
	if w.conns != nil {
		found = w.conns.left
	}
	for {
		var server string
		cut := 0
		select {
		case <-ctx.Done():
			return
		case l := <-found: // a new connection found it; its sockets are cut
			server, cut = l.server, l.cut
		case <-t.C:
			s, dialed, left, err := w.check(ctx)
			if err != nil || !left {
				// A server that does not answer is the pool's keepalives'
				// and the requests' bounds' to deal with.
				continue
			}
			server = s
			if w.conns != nil {
				w.conns.order.refused(dialed) // tried last from now on
				cut = w.conns.cut(server)
			}
		}
		w.pool.Reset()
		w.logger.Warn("database: the server this process is connected to is no longer the leader (it waits for a synchronous standby and none is connected); reconnecting to the host that takes writes now",
			"server", server, "connections_cut", cut)
		if w.reset != nil {
			w.reset()
		}
	}
}

// check runs stranded on one of the pool's connections; server is its
// remote address, dialed the address it was dialled at.
func (w leaderWatch) check(ctx context.Context) (server, dialed string, left bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	c, err := w.pool.Acquire(ctx)
	if err != nil {
		return "", "", false, fmt.Errorf("acquire: %w", err)
	}
	defer c.Release()
	pc := c.Conn().PgConn()
	server, dialed = pc.Conn().RemoteAddr().String(), dialedAddr(pc.Conn())
	left, err = w.stranded(ctx, pc)
	return server, dialed, left, err
}

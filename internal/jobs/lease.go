// A lease tells a live job run from a dead one without waiting for a
// timeout. A worker process keeps one database session of its own, the
// lease connection, and each fan-out, dispatch or bulk replay run takes a
// session-level advisory lock on it, keyed by its River job id, for as
// long as it runs.
// Postgres releases a session's locks the moment the session ends: when the
// process is killed, when its connection breaks, when Postgres restarts. A
// job row that is still `running` but whose lock is free therefore has no
// live run, and the sweeper replaces its job within seconds (ReplaceDead)
// instead of waiting for River's rescuer.
//
// The locks share Postgres's 64-bit advisory key space with River, which
// takes transaction-level locks on hashed keys only for its deprecated
// unique-insert method; a collision would at worst make a dead run look
// alive for one transaction.

package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivershared/startstop"
	"github.com/riverqueue/river/rivershared/testsignal"

	"github.com/sluice-dev/sluice/internal/batch"
)

// ErrLeaseLost is returned by Lease.Check once the lease connection has broken
// since the lease was taken: the run no longer holds its lock and must stop.
var ErrLeaseLost = errors.New("lease: lost with the lease connection")

// ErrLeaseHeld is returned by Acquire when another session holds the key.
var ErrLeaseHeld = errors.New("lease: held by another session")

// DefaultLeaseCheckInterval is LeaseConfig.CheckInterval's default.
const DefaultLeaseCheckInterval = 500 * time.Millisecond

// LeaseConfig configures a LeaseHolder.
type LeaseConfig struct {
	// ConnConfig is where the lease connection goes (a copy is used).
	// Required.
	ConnConfig *pgx.ConnConfig
	// CheckInterval is how often the lease connection is pinged, so that a
	// break is noticed (and runs stop) even when no run starts or ends.
	// Default DefaultLeaseCheckInterval.
	CheckInterval time.Duration
	// Clock paces the checks (default SystemClock).
	Clock  Clock
	Logger *slog.Logger
}

// Resolve returns c with its defaults set, or an error if it is not
// valid.
func (c LeaseConfig) Resolve() (LeaseConfig, error) {
	c.CheckInterval = cmp.Or(c.CheckInterval, DefaultLeaseCheckInterval)
	c.Clock = cmp.Or(c.Clock, SystemClock)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, c.validate()
}

func (c LeaseConfig) validate() error {
	switch {
	case c.ConnConfig == nil:
		return errors.New("lease: ConnConfig is required")
	case c.CheckInterval < 0:
		return fmt.Errorf("lease: CheckInterval must be positive, not %s", c.CheckInterval)
	}
	return nil
}

// LeaseHolder owns a process's lease connection and the locks on it. Runs take
// and give up their locks in groups (package batch): every run of a
// process goes through the one connection, and one statement a lock made
// them queue for it, for longer than the sweeper's grace for a run to take
// its lease when many runs start at once.
//
// It is a startstop.Service: Start opens the connection and checks it
// every CheckInterval; Stop stops the checks and closes the connection,
// which releases every lock still held. Runs take leases only while it
// runs.
type LeaseHolder struct {
	startstop.BaseStartStop

	cfg    LeaseConfig
	groups atomic.Pointer[leaseGroups] // the running (or last) start's; nil before Start

	mu   sync.Mutex
	conn *pgx.Conn
	gen  atomic.Uint64 // incremented each time the connection is dropped

	testSignals leaseTestSignals
}

// leaseGroups are the batchers that take and give up keys in groups.
type leaseGroups struct {
	acquires *batch.Batcher[int64, acquired]
	releases *batch.Batcher[held, struct{}]
}

// leaseTestSignals let tests wait for what the holder's loop did.
type leaseTestSignals struct {
	checked testsignal.TestSignal[struct{}] // a health check ended
}

// acquired is what taking one key in a group gave.
type acquired struct {
	got bool   // the key was free
	gen uint64 // the connection it was taken on
}

// held is a key to give up, with the connection it was taken on.
type held struct {
	key int64
	gen uint64
}

// groupTimeout bounds one group's statement: a group is committed on
// behalf of many runs, past any one run's context, and a connection that
// does not answer in that time is dropped (its runs stop, and are taken
// over).
const groupTimeout = 5 * time.Second

// maxGroup bounds the keys one statement takes or gives up: a worker's
// whole complement of runs starting at once.
const maxGroup = 1000

// Lease is one run's hold on its key.
type Lease struct {
	h   *LeaseHolder
	key int64
	gen uint64
}

// NewLeaseHolder returns a LeaseHolder; Start starts it.
func NewLeaseHolder(cfg LeaseConfig) (*LeaseHolder, error) {
	cfg, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	return &LeaseHolder{cfg: cfg}, nil
}

// Start connects (if it can; runs connect later otherwise) and pings the
// lease connection every CheckInterval until Stop or until ctx ends.
func (h *LeaseHolder) Start(ctx context.Context) error {
	ctx, shouldStart, started, stopped := h.StartInit(ctx)
	if !shouldStart {
		return nil
	}
	// One committer each: the groups share the one connection.
	g := &leaseGroups{
		acquires: batch.New(batch.Config{Committers: 1, MaxBatch: maxGroup}, h.acquireGroup),
		releases: batch.New(batch.Config{Committers: 1, MaxBatch: maxGroup}, h.releaseGroup),
	}
	h.groups.Store(g)
	h.mu.Lock()
	if err := h.connect(ctx); err != nil {
		h.cfg.Logger.Warn("lease connection not open yet", "err", err)
	}
	h.mu.Unlock()
	go func() {
		started()
		defer stopped()
		for {
			tick, stop := h.cfg.Clock.After(h.cfg.CheckInterval)
			select {
			case <-ctx.Done():
				stop()
				startstop.StopAllParallel(g.acquires, g.releases)
				h.mu.Lock()
				h.drop()
				h.mu.Unlock()
				return
			case <-tick:
				h.check()
				h.testSignals.checked.Signal(struct{}{})
			}
		}
	}()
	return nil
}

// Acquire takes the lock on key for a run, connecting first if needed. It
// returns ErrLeaseHeld when another session holds it.
func (h *LeaseHolder) Acquire(ctx context.Context, key int64) (*Lease, error) {
	g := h.groups.Load()
	if g == nil {
		return nil, fmt.Errorf("lease: acquire: %w", batch.ErrClosed)
	}
	a, err := g.acquires.Submit(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("lease: acquire: %w", err)
	}
	if !a.got {
		return nil, ErrLeaseHeld
	}
	return &Lease{h: h, key: key, gen: a.gen}, nil
}

// acquireGroup takes the keys in one statement.
func (h *LeaseHolder) acquireGroup(ctx context.Context, keys []int64) ([]acquired, error) {
	ctx, cancel := context.WithTimeout(ctx, groupTimeout)
	defer cancel()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.connect(ctx); err != nil {
		return nil, err
	}
	rows, err := h.conn.Query(ctx, `SELECT pg_try_advisory_lock(k) FROM unnest($1::bigint[]) WITH ORDINALITY AS u(k, i) ORDER BY i`, keys)
	got, err := collectBools(rows, err)
	if err == nil && len(got) != len(keys) {
		err = fmt.Errorf("%d answers for %d keys", len(got), len(keys))
	}
	if err != nil {
		h.drop()
		return nil, fmt.Errorf("take %d keys: %w", len(keys), err)
	}
	gen := h.gen.Load()
	out := make([]acquired, len(keys))
	for i := range keys {
		out[i] = acquired{got: got[i], gen: gen}
	}
	return out, nil
}

// Check returns ErrLeaseLost if the lease connection broke since l was taken.
// It takes no lock: runs check before every claim, and a group being
// taken or given up holds the connection for a round trip.
func (l *Lease) Check() error {
	if l.h.gen.Load() != l.gen {
		return ErrLeaseLost
	}
	return nil
}

// Release gives the lock up. If the connection broke meanwhile there is
// nothing to release: Postgres already did.
func (l *Lease) Release() {
	if g := l.h.groups.Load(); g != nil {
		_, _ = g.releases.Submit(context.Background(), held{key: l.key, gen: l.gen})
	}
}

// releaseGroup gives up the keys taken on the current connection in one
// statement; the others went with their connection.
func (h *LeaseHolder) releaseGroup(ctx context.Context, hs []held) ([]struct{}, error) {
	ctx, cancel := context.WithTimeout(ctx, groupTimeout)
	defer cancel()
	h.mu.Lock()
	defer h.mu.Unlock()
	var keys []int64
	for _, x := range hs {
		if h.conn != nil && x.gen == h.gen.Load() {
			keys = append(keys, x.key)
		}
	}
	if len(keys) > 0 {
		rows, err := h.conn.Query(ctx, `SELECT pg_advisory_unlock(k) FROM unnest($1::bigint[]) AS k`, keys)
		if _, err := collectBools(rows, err); err != nil {
			h.drop()
		}
	}
	return make([]struct{}, len(hs)), nil
}

// collectBools reads a query's one boolean column.
func collectBools(rows pgx.Rows, err error) ([]bool, error) {
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[bool])
	if err != nil {
		return nil, fmt.Errorf("read answers: %w", err)
	}
	return got, nil
}

// connect opens the lease connection if there is none. h.mu is held.
func (h *LeaseHolder) connect(ctx context.Context) error {
	if h.conn != nil {
		return nil
	}
	conn, err := pgx.ConnectConfig(ctx, h.cfg.ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("open the lease connection: %w", err)
	}
	h.conn = conn
	return nil
}

// drop closes a broken lease connection; every lease taken on it is lost.
// h.mu is held.
func (h *LeaseHolder) drop() {
	if h.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = h.conn.Close(ctx)
	h.conn = nil
	h.gen.Add(1)
}

// check pings the lease connection and drops it if it does not answer.
func (h *LeaseHolder) check() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := h.conn.Ping(ctx); err != nil {
		h.cfg.Logger.Warn("lease connection lost: runs on this worker stop and are taken over", "err", err)
		h.drop()
	}
}

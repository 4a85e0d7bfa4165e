// A lease tells a live job run from a dead one without waiting for a
// timeout. A worker process keeps one database session of its own, the
// lease connection, and each fan-out or dispatch run takes a session-level
// advisory lock on it, keyed by its River job id, for as long as it runs.
// Postgres releases a session's locks the moment the session ends: when the
// process is killed, when its connection breaks, when Postgres restarts. A
// job row that is still `running` but whose lock is free therefore has no
// live run, and the sweeper hands its work to a new job within seconds
// instead of waiting for River's rescuer.
//
// The locks share Postgres's 64-bit advisory key space with River, which
// takes transaction-level locks on hashed keys only for its deprecated
// unique-insert method; a collision would at worst make a dead run look
// alive for one transaction.

package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/batch"
)

// ErrLeaseLost is returned by Lease.Check once the lease connection has broken
// since the lease was taken: the run no longer holds its lock and must stop.
var ErrLeaseLost = errors.New("lease: lost with the lease connection")

// ErrLeaseHeld is returned by Acquire when another session holds the key.
var ErrLeaseHeld = errors.New("lease: held by another session")

// LeaseConfig configures a LeaseHolder.
type LeaseConfig struct {
	// ConnConfig is where the lease connection goes (a copy is used).
	ConnConfig *pgx.ConnConfig
	// CheckInterval is how often the lease connection is pinged, so that a
	// break is noticed (and runs stop) even when no run starts or ends.
	// Default 500ms.
	CheckInterval time.Duration
	Logger        *slog.Logger
}

// LeaseHolder owns a process's lease connection and the locks on it. Runs take
// and give up their locks in groups (package batch): every run of a
// process goes through the one connection, and one statement a lock made
// them queue for it. Draining 10,000 endpoints, 140 runs started a second
// and half of them waited over 0.6 s (one 4.9 s) for their turn, past the
// sweeper's grace for a run to take its lease.
type LeaseHolder struct {
	cfg      LeaseConfig
	acquires *batch.Batcher[int64, acquired]
	releases *batch.Batcher[held, struct{}]

	mu   sync.Mutex
	conn *pgx.Conn
	gen  atomic.Uint64 // incremented each time the connection is dropped

	started bool
	stop    chan struct{}
	done    chan struct{}
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

// NewLeaseHolder returns a LeaseHolder; Start begins its health checks.
func NewLeaseHolder(cfg LeaseConfig) *LeaseHolder {
	cfg.CheckInterval = cmpOr(cfg.CheckInterval, 500*time.Millisecond)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &LeaseHolder{cfg: cfg, stop: make(chan struct{}), done: make(chan struct{})}
	// One committer each: the groups share the one connection.
	h.acquires = batch.New(batch.Config{Committers: 1, MaxBatch: maxGroup}, h.acquireGroup)
	h.releases = batch.New(batch.Config{Committers: 1, MaxBatch: maxGroup}, h.releaseGroup)
	return h
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Start connects (if it can; runs connect later otherwise) and pings the
// lease connection every CheckInterval until Close.
func (h *LeaseHolder) Start(ctx context.Context) {
	h.mu.Lock()
	h.started = true
	if err := h.connect(ctx); err != nil {
		h.cfg.Logger.Warn("lease connection not open yet", "err", err)
	}
	h.mu.Unlock()
	go func() {
		defer close(h.done)
		t := time.NewTicker(h.cfg.CheckInterval)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
				h.check()
			}
		}
	}()
}

// Close stops the health checks and closes the lease connection, which
// releases every lock still held.
func (h *LeaseHolder) Close() {
	h.mu.Lock()
	started := h.started
	h.mu.Unlock()
	select {
	case <-h.stop:
	default:
		close(h.stop)
	}
	if started {
		<-h.done
	}
	h.acquires.Close()
	h.releases.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drop()
}

// Acquire takes the lock on key for a run, connecting first if needed. It
// returns ErrLeaseHeld when another session holds it.
func (h *LeaseHolder) Acquire(ctx context.Context, key int64) (*Lease, error) {
	a, err := h.acquires.Submit(ctx, key)
	if err != nil {
		return nil, err
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
		return nil, fmt.Errorf("lease: acquire: %w", err)
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
	_, _ = l.h.releases.Submit(context.Background(), held{key: l.key, gen: l.gen})
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
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[bool])
}

// connect opens the lease connection if there is none. h.mu is held.
func (h *LeaseHolder) connect(ctx context.Context) error {
	if h.conn != nil {
		return nil
	}
	conn, err := pgx.ConnectConfig(ctx, h.cfg.ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("lease: connect: %w", err)
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

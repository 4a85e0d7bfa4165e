// Package lease tells a live job run from a dead one without waiting for a
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
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrLost is returned by Lease.Check once the lease connection has broken
// since the lease was taken: the run no longer holds its lock and must stop.
var ErrLost = errors.New("lease: lost with the lease connection")

// ErrHeld is returned by Acquire when another session holds the key.
var ErrHeld = errors.New("lease: held by another session")

// Config configures a Holder.
type Config struct {
	// ConnConfig is where the lease connection goes (a copy is used).
	ConnConfig *pgx.ConnConfig
	// CheckInterval is how often the lease connection is pinged, so that a
	// break is noticed (and runs stop) even when no run starts or ends.
	// Default 500ms.
	CheckInterval time.Duration
	Logger        *slog.Logger
}

// Holder owns a process's lease connection and the locks on it.
type Holder struct {
	cfg Config

	mu   sync.Mutex
	conn *pgx.Conn
	gen  uint64 // incremented each time the connection is dropped

	started bool
	stop    chan struct{}
	done    chan struct{}
}

// Lease is one run's hold on its key.
type Lease struct {
	h   *Holder
	key int64
	gen uint64
}

// New returns a Holder; Start begins its health checks.
func New(cfg Config) *Holder {
	cfg.CheckInterval = cmpOr(cfg.CheckInterval, 500*time.Millisecond)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Holder{cfg: cfg, stop: make(chan struct{}), done: make(chan struct{})}
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Start connects (if it can; runs connect later otherwise) and pings the
// lease connection every CheckInterval until Close.
func (h *Holder) Start(ctx context.Context) {
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
func (h *Holder) Close() {
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
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drop()
}

// Acquire takes the lock on key for a run, connecting first if needed. It
// returns ErrHeld when another session holds it.
func (h *Holder) Acquire(ctx context.Context, key int64) (*Lease, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.connect(ctx); err != nil {
		return nil, err
	}
	var got bool
	if err := h.conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&got); err != nil {
		h.drop()
		return nil, fmt.Errorf("lease: acquire: %w", err)
	}
	if !got {
		return nil, ErrHeld
	}
	return &Lease{h: h, key: key, gen: h.gen}, nil
}

// Check returns ErrLost if the lease connection broke since l was taken.
func (l *Lease) Check() error {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	if l.h.conn == nil || l.h.gen != l.gen {
		return ErrLost
	}
	return nil
}

// Release gives the lock up. If the connection broke meanwhile there is
// nothing to release: Postgres already did.
func (l *Lease) Release() {
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn == nil || h.gen != l.gen {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := h.conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", l.key); err != nil {
		h.drop()
	}
}

// connect opens the lease connection if there is none. h.mu is held.
func (h *Holder) connect(ctx context.Context) error {
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
func (h *Holder) drop() {
	if h.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = h.conn.Close(ctx)
	h.conn = nil
	h.gen++
}

// check pings the lease connection and drops it if it does not answer.
func (h *Holder) check() {
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

// Package ingest commits posted events and makes their deliveries in the
// same transaction (fanout.Insert): a batch post as it is, and concurrent
// single-event posts grouped into shared transactions (group commit). Each
// POST /v1/events still answers only after its event and its deliveries
// are committed, but a busy API commits tens of events per transaction
// instead of one each: the database's per-commit cost is what bounds
// single-event ingest. At low load a batch is one event and nothing waits:
// a batch is whatever has queued up while the previous one committed. An
// event with an Idempotency-Key is stored on its own
// (fanout.InsertOne).
//
// After each commit, the endpoints whose queues changed are handed to their
// dispatch runs (a run lingering in this process is signalled, and given
// the deliveries themselves when the commit knows them whole; others get a
// job or a notification: store.DispatchOrWake) by one goroutine, off the
// posts' path. It merges the endpoints of the commits that land while it
// works, so under load each pass covers many commits. A pass the database
// fails is tried again; if the process dies first, the sweeper's walk
// queues their dispatch (every 5 s by default).
//
// An event Postgres rejects (store.RowRejected) fails alone: its batch is
// split until the event is found, and every other event, whichever tenant
// posted it, is committed (see package batch).
package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river/rivershared/startstop"

	"github.com/sluice-dev/sluice/internal/batch"
	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// ErrClosed is returned for events submitted before Start or after Stop.
var ErrClosed = batch.ErrClosed

// Defaults of Config.
const (
	CommittersDefault = 4
	MaxBatchDefault   = 200
)

// Config tunes an Ingester.
type Config struct {
	// Committers is how many groups may commit at once (default
	// CommittersDefault).
	Committers int
	// MaxBatch bounds the events in one transaction (default
	// MaxBatchDefault).
	MaxBatch int
	// Waker signals dispatch runs lingering in this process; nil (a process
	// without workers) signals none.
	Waker Waker
	// Logger reports hand-offs that failed (the sweeper repairs them).
	Logger *slog.Logger
}

// Resolve returns the configuration with defaults applied, or an error if
// it cannot work.
func (c Config) Resolve() (Config, error) {
	if c.Committers == 0 {
		c.Committers = CommittersDefault
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = MaxBatchDefault
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.Committers < 0:
		return c, errors.New("ingest: Committers must be positive")
	case c.MaxBatch < 0:
		return c, errors.New("ingest: MaxBatch must be positive")
	}
	return c, nil
}

// Waker signals the dispatch runs of endpoints registered in this process,
// handing them the deliveries made, and returns the endpoints that have
// none (dispatch.Waker). Seq is read before the deliveries are inserted.
type Waker interface {
	Seq() uint64
	Hand(seq uint64, touched store.Touched) []uuid.UUID
}

// Ingester commits posted events, single ones in groups, and hands the
// endpoints they reach to their dispatch runs. It is a startstop.Service:
// Start before the API serves, Stop after the HTTP server has shut down.
type Ingester struct {
	startstop.BaseStartStop

	st      *store.Store
	jobs    store.JobQueue
	cfg     Config
	batcher atomic.Pointer[batch.Batcher[fanout.TenantEvent, sluice.Event]] // nil unless started
	handoff *handoff
}

// New returns an Ingester on st that queues the jobs its commits need on
// jobs; Start starts it.
func New(st *store.Store, jobs store.JobQueue, cfg Config) (*Ingester, error) {
	cfg, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	return &Ingester{st: st, jobs: jobs, cfg: cfg, handoff: newHandoff(st, jobs, cfg.Waker, cfg.Logger)}, nil
}

// Start starts the group commit and the hand-off loop.
func (i *Ingester) Start(ctx context.Context) error {
	ctx, shouldStart, started, stopped := i.StartInit(ctx)
	if !shouldStart {
		return nil
	}
	b := batch.New(batch.Config{Committers: i.cfg.Committers, MaxBatch: i.cfg.MaxBatch, Isolate: store.RowRejected}, i.commit)
	i.batcher.Store(b)
	go func() {
		started()
		defer stopped()
		i.handoff.run(ctx) // until Stop
		i.batcher.Store(nil)
		b.Close()           // the groups in flight commit
		i.handoff.pass(ctx) // and their endpoints are handed over
	}()
	return nil
}

// commit stores a group and passes its endpoints to the hand-off.
func (i *Ingester) commit(ctx context.Context, evs []fanout.TenantEvent) ([]sluice.Event, error) {
	seq := i.handoff.seq()
	out, touched, err := fanout.Insert(ctx, i.st, evs, i.jobs)
	if err != nil {
		return nil, fmt.Errorf("commit group: %w", err)
	}
	i.handoff.add(seq, touched)
	return out, nil
}

// SubmitBatch commits one tenant's batch of events on its own (a batch is
// a group already) and returns them as stored, in order. Its endpoints are
// handed over with the others'.
func (i *Ingester) SubmitBatch(ctx context.Context, tenantID uuid.UUID, evs []sluice.NewEvent) ([]sluice.Event, error) {
	if i.batcher.Load() == nil {
		return nil, ErrClosed
	}
	group := make([]fanout.TenantEvent, len(evs))
	for j, ev := range evs {
		group[j] = fanout.TenantEvent{TenantID: tenantID, Event: ev}
	}
	return i.commit(ctx, group)
}

// Submit commits one event, possibly with others, and returns it as stored.
// An event Postgres refuses fails with an error store.RowRejected
// recognises.
func (i *Ingester) Submit(ctx context.Context, tenantID uuid.UUID, ev sluice.NewEvent) (sluice.Event, error) {
	b := i.batcher.Load()
	if b == nil {
		return sluice.Event{}, ErrClosed
	}
	return b.Submit(ctx, fanout.TenantEvent{TenantID: tenantID, Event: ev}) //nolint:wrapcheck // commit wraps its own
}

// SubmitIdempotent commits one event that carries an Idempotency-Key, on
// its own, and reports whether it created it: a key seen in the last
// fanout.IdempotencyWindow answers with the event it created. Its error is
// fanout's as it is: a conflict's text is the API's answer.
func (i *Ingester) SubmitIdempotent(ctx context.Context, tenantID uuid.UUID, ev sluice.NewEvent) (sluice.Event, bool, error) {
	return fanout.InsertOne(ctx, i.st, tenantID, ev, i.jobs) //nolint:wrapcheck // wrapped by fanout
}

// handoff hands endpoints whose queues changed to their dispatch runs, one
// pass at a time, merging the commits added while a pass runs.
type handoff struct {
	st     *store.Store
	jobs   store.JobQueue
	waker  Waker
	logger *slog.Logger

	mu           sync.Mutex
	pending      []committed
	pendingBytes int           // the deliveries pending hold (store.Touched.Bytes)
	kick         chan struct{} // holds a token while pending has commits
	failing      bool          // the last pass failed; read and written by the loop alone
}

// handoffTimeout bounds one pass, so that a database that stopped
// answering cannot hold up Close.
const handoffTimeout = 10 * time.Second

// committed is what one commit touched, with the Waker's Seq read before it.
type committed struct {
	seq     uint64
	touched store.Touched
}

func newHandoff(st *store.Store, jobs store.JobQueue, waker Waker, logger *slog.Logger) *handoff {
	return &handoff{st: st, jobs: jobs, waker: waker, logger: logger, kick: make(chan struct{}, 1)}
}

// seq is the Waker's Seq, to read before a commit (0 without a Waker).
func (h *handoff) seq() uint64 {
	if h.waker == nil {
		return 0
	}
	return h.waker.Seq()
}

// maxPendingBytes bounds the deliveries held for the next pass: commits
// that land while a slow pass runs are handed over past that without
// them, as endpoints to wake, so a database that slows down cannot make
// ingest hold every payload posted meanwhile.
const maxPendingBytes = 8 << 20

func (h *handoff) add(seq uint64, touched store.Touched) {
	if len(touched) == 0 {
		return
	}
	h.mu.Lock()
	if size := touched.Bytes(); h.pendingBytes+size > maxPendingBytes {
		touched = store.TouchedWithout(touched.Endpoints())
	} else {
		h.pendingBytes += size
	}
	h.pending = append(h.pending, committed{seq: seq, touched: touched})
	h.mu.Unlock()
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// run makes a pass each time commits are added, until ctx ends.
func (h *handoff) run(ctx context.Context) {
	for {
		select {
		case <-h.kick:
			h.pass(ctx)
		case <-ctx.Done():
			return
		}
	}
}

// handoffRetry is the pause before a failed pass's endpoints are handed
// over again.
const handoffRetry = 250 * time.Millisecond

// pass hands over the pending endpoints. Those it failed to reach (the
// database is down) are pending again after handoffRetry, unless ctx has
// ended; their deliveries are committed, so nothing is lost meanwhile. The
// pass itself outlives ctx, bounded by handoffTimeout, so that the last one
// hands over what the last commits added.
func (h *handoff) pass(ctx context.Context) {
	h.mu.Lock()
	commits := h.pending
	h.pending, h.pendingBytes = nil, 0
	h.mu.Unlock()
	ids := h.hand(commits)
	if len(ids) == 0 {
		return
	}
	passCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handoffTimeout)
	defer cancel()
	err := h.st.DispatchOrWake(passCtx, ids, h.jobs)
	switch {
	case err != nil && !h.failing:
		h.logger.Warn("new deliveries could not be handed to their dispatch runs; retrying", "endpoints", len(ids), "err", err)
	case err == nil && h.failing:
		h.logger.Info("new deliveries are handed to their dispatch runs again")
	}
	h.failing = err != nil
	if err != nil {
		h.retryLater(ctx, ids)
	}
}

// hand hands the commits' deliveries to the runs lingering here, and
// returns the endpoints (each once) that have none.
func (h *handoff) hand(commits []committed) []uuid.UUID {
	rest := map[uuid.UUID]bool{}
	for _, c := range commits {
		ids := c.touched.Endpoints()
		if h.waker != nil {
			ids = h.waker.Hand(c.seq, c.touched)
		}
		for _, id := range ids {
			rest[id] = true
		}
	}
	ids := make([]uuid.UUID, 0, len(rest))
	for id := range rest {
		ids = append(ids, id)
	}
	return ids
}

// retryLater makes ids pending again after handoffRetry, unless ctx ends
// first (the Ingester is stopping): then the sweeper's walk finds them.
func (h *handoff) retryLater(ctx context.Context, ids []uuid.UUID) {
	t := time.NewTimer(handoffRetry)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
		h.add(0, store.TouchedWithout(ids))
	}
}

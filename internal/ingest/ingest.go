// Package ingest commits posted events and makes their deliveries in the
// same transaction (store.CreateTenantEvents): a batch post as it is, and
// concurrent single-event posts grouped into shared transactions (group
// commit). Each POST /v1/events still
// answers only after its event and its deliveries are committed, but a busy
// API commits tens of events per transaction instead of one each: the
// database's per-commit cost is what bounds single-event ingest. At low load
// a batch is one event and nothing waits: a batch is whatever has queued up
// while the previous one committed.
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
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/batch"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// ErrClosed is returned for events submitted after Close.
var ErrClosed = batch.ErrClosed

// ErrOutcomeUnknown is returned by Submit when its context ends while its
// event is being committed: the event may or may not be stored.
var ErrOutcomeUnknown = batch.ErrOutcomeUnknown

// Config tunes a Batcher.
type Config struct {
	// Committers is how many batches may commit at once (default 4).
	Committers int
	// MaxBatch bounds the events in one transaction (default 200).
	MaxBatch int
	// Waker signals dispatch runs lingering in this process; nil (a process
	// without workers) signals none.
	Waker Waker
	// Logger reports hand-offs that failed (the sweeper repairs them).
	Logger *slog.Logger
}

// Waker signals the dispatch runs of endpoints registered in this process,
// handing them the deliveries made, and returns the endpoints that have
// none (dispatch.Waker). Seq is read before the deliveries are inserted.
type Waker interface {
	Seq() uint64
	Hand(seq uint64, touched store.Touched) []uuid.UUID
}

// Batcher commits submitted events in groups.
type Batcher struct {
	b       *batch.Batcher[store.TenantEvent, sluice.Event]
	commit  batch.CommitFunc[store.TenantEvent, sluice.Event]
	handoff *handoff
}

// New starts a Batcher; Close stops it.
func New(st *store.Store, jobs store.JobQueue, cfg Config) *Batcher {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := startHandoff(st, jobs, cfg.Waker, cfg.Logger)
	commit := func(ctx context.Context, evs []store.TenantEvent) ([]sluice.Event, error) {
		seq := h.seq()
		out, touched, err := st.CreateTenantEvents(ctx, evs, jobs)
		if err == nil {
			h.add(seq, touched)
		}
		return out, err
	}
	bcfg := batch.Config{Committers: cfg.Committers, MaxBatch: cfg.MaxBatch, Isolate: store.RowRejected}
	return &Batcher{b: batch.New(bcfg, commit), commit: commit, handoff: h}
}

// SubmitBatch commits one tenant's batch of events on its own (a batch is
// a group already) and returns them as stored, in order. Its endpoints are
// handed over with the others'.
func (b *Batcher) SubmitBatch(ctx context.Context, tenantID uuid.UUID, evs []sluice.NewEvent) ([]sluice.Event, error) {
	group := make([]store.TenantEvent, len(evs))
	for i, ev := range evs {
		group[i] = store.TenantEvent{TenantID: tenantID, Event: ev}
	}
	return b.commit(ctx, group)
}

// Submit commits one event, possibly with others, and returns it as stored.
// An event Postgres refuses fails with an error store.RowRejected
// recognises; one whose ctx ends while it is being committed, with
// ErrOutcomeUnknown.
func (b *Batcher) Submit(ctx context.Context, tenantID uuid.UUID, ev sluice.NewEvent) (sluice.Event, error) {
	return b.b.Submit(ctx, store.TenantEvent{TenantID: tenantID, Event: ev})
}

// Close stops the Batcher after the batches in flight have committed and
// their endpoints have been handed to their dispatch runs.
func (b *Batcher) Close() {
	b.b.Close()
	b.handoff.close()
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
	done         chan struct{}
	stopped      chan struct{}
	once         sync.Once
	failing      bool // the last pass failed; read and written by run alone
}

// handoffTimeout bounds one pass, so that a database that stopped
// answering cannot hold up Close.
const handoffTimeout = 10 * time.Second

// committed is what one commit touched, with the Waker's Seq read before it.
type committed struct {
	seq     uint64
	touched store.Touched
}

func startHandoff(st *store.Store, jobs store.JobQueue, waker Waker, logger *slog.Logger) *handoff {
	h := &handoff{
		st: st, jobs: jobs, waker: waker, logger: logger,
		kick: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{}),
	}
	go h.run()
	return h
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

func (h *handoff) run() {
	defer close(h.stopped)
	for {
		select {
		case <-h.kick:
			h.pass()
		case <-h.done:
			h.pass() // what the last commits added
			return
		}
	}
}

// handoffRetry is the pause before a failed pass's endpoints are handed
// over again.
const handoffRetry = 250 * time.Millisecond

// pass hands over the pending endpoints. Those it failed to reach (the
// database is down) are pending again after handoffRetry; their deliveries
// are committed, so nothing is lost meanwhile.
func (h *handoff) pass() {
	h.mu.Lock()
	commits := h.pending
	h.pending, h.pendingBytes = nil, 0
	h.mu.Unlock()
	ids := h.hand(commits)
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), handoffTimeout)
	defer cancel()
	err := h.st.DispatchOrWake(ctx, ids, h.jobs)
	switch {
	case err != nil && !h.failing:
		h.logger.Warn("new deliveries could not be handed to their dispatch runs; retrying", "endpoints", len(ids), "err", err)
	case err == nil && h.failing:
		h.logger.Info("new deliveries are handed to their dispatch runs again")
	}
	h.failing = err != nil
	if err != nil {
		h.retryLater(ids)
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

// retryLater makes ids pending again after handoffRetry, unless the
// hand-off is closing: then the sweeper's walk finds them.
func (h *handoff) retryLater(ids []uuid.UUID) {
	select {
	case <-h.done:
	case <-time.After(handoffRetry):
		h.add(0, store.TouchedWithout(ids))
	}
}

func (h *handoff) close() {
	h.once.Do(func() { close(h.done) })
	<-h.stopped
}

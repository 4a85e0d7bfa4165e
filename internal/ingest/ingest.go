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
// After each commit, the endpoints whose queues changed are nudged
// (dispatch.Nudger.Nudge) by one goroutine, off the posts' path. It merges the endpoints of the commits that land while it
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
	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// ErrClosed is returned for events submitted after Close.
var ErrClosed = batch.ErrClosed

// Config tunes a Batcher.
type Config struct {
	// Committers is how many batches may commit at once (default 4).
	Committers int
	// MaxBatch bounds the events in one transaction (default 200).
	MaxBatch int
	// Nudger nudges the endpoints of each commit: the process's, whose
	// runs it wakes in process. Nil: a Nudger of its own on the job queue,
	// for a process without dispatch runs.
	Nudger *dispatch.Nudger
	// Logger reports nudges that failed (the sweeper repairs them).
	Logger *slog.Logger
}

// Batcher commits submitted events in groups.
type Batcher struct {
	b      *batch.Batcher[store.TenantEvent, sluice.Event]
	commit batch.CommitFunc[store.TenantEvent, sluice.Event]
	nudges *nudges
}

// New starts a Batcher; Close stops it.
func New(st *store.Store, jobs store.JobQueue, cfg Config) *Batcher {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Nudger == nil {
		cfg.Nudger = dispatch.NewNudger(st, jobs, dispatch.NudgerConfig{Logger: cfg.Logger})
	}
	n := startNudges(cfg.Nudger, cfg.Logger)
	commit := func(ctx context.Context, evs []store.TenantEvent) ([]sluice.Event, error) {
		out, touched, err := st.CreateTenantEvents(ctx, evs, jobs)
		if err == nil {
			n.add(touched.Endpoints())
		}
		return out, err
	}
	bcfg := batch.Config{Committers: cfg.Committers, MaxBatch: cfg.MaxBatch, Isolate: store.RowRejected}
	return &Batcher{b: batch.New(bcfg, commit), commit: commit, nudges: n}
}

// SubmitBatch commits one tenant's batch of events on its own (a batch is
// a group already) and returns them as stored, in order. Its endpoints are
// nudged with the others'.
func (b *Batcher) SubmitBatch(ctx context.Context, tenantID uuid.UUID, evs []sluice.NewEvent) ([]sluice.Event, error) {
	group := make([]store.TenantEvent, len(evs))
	for i, ev := range evs {
		group[i] = store.TenantEvent{TenantID: tenantID, Event: ev}
	}
	return b.commit(ctx, group)
}

// Submit commits one event, possibly with others, and returns it as stored.
// An event Postgres refuses fails with an error store.RowRejected
// recognises.
func (b *Batcher) Submit(ctx context.Context, tenantID uuid.UUID, ev sluice.NewEvent) (sluice.Event, error) {
	return b.b.Submit(ctx, store.TenantEvent{TenantID: tenantID, Event: ev})
}

// Close stops the Batcher after the batches in flight have committed and
// their endpoints have been nudged.
func (b *Batcher) Close() {
	b.b.Close()
	b.nudges.close()
}

// nudges nudges the endpoints whose queues changed, one pass at a time,
// merging the commits added while a pass runs.
type nudges struct {
	nudger *dispatch.Nudger
	logger *slog.Logger

	mu      sync.Mutex
	pending map[uuid.UUID]struct{}
	kick    chan struct{} // holds a token while pending has endpoints
	done    chan struct{}
	stopped chan struct{}
	once    sync.Once
	failing bool // the last pass failed; read and written by run alone
}

// nudgeTimeout bounds one pass, so that a database that stopped answering
// cannot hold up Close.
const nudgeTimeout = 10 * time.Second

func startNudges(nudger *dispatch.Nudger, logger *slog.Logger) *nudges {
	n := &nudges{
		nudger: nudger, logger: logger, pending: map[uuid.UUID]struct{}{},
		kick: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{}),
	}
	go n.run()
	return n
}

func (n *nudges) add(endpointIDs []uuid.UUID) {
	if len(endpointIDs) == 0 {
		return
	}
	n.mu.Lock()
	for _, id := range endpointIDs {
		n.pending[id] = struct{}{}
	}
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *nudges) run() {
	defer close(n.stopped)
	for {
		select {
		case <-n.kick:
			n.pass()
		case <-n.done:
			n.pass() // what the last commits added
			return
		}
	}
}

// nudgeRetry is the pause before a failed pass's endpoints are nudged
// again.
const nudgeRetry = 250 * time.Millisecond

// pass nudges the pending endpoints. Those it failed to reach (the
// database is down) are pending again after nudgeRetry; their deliveries
// are committed, so nothing is lost meanwhile.
func (n *nudges) pass() {
	n.mu.Lock()
	ids := make([]uuid.UUID, 0, len(n.pending))
	for id := range n.pending {
		ids = append(ids, id)
	}
	clear(n.pending)
	n.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), nudgeTimeout)
	defer cancel()
	err := n.nudger.Nudge(ctx, ids)
	switch {
	case err != nil && !n.failing:
		n.logger.Warn("could not nudge dispatch for new deliveries; retrying", "endpoints", len(ids), "err", err)
	case err == nil && n.failing:
		n.logger.Info("nudging dispatch for new deliveries again")
	}
	n.failing = err != nil
	if err != nil {
		n.retryLater(ids)
	}
}

// retryLater makes ids pending again after nudgeRetry, unless the Batcher
// is closing: then the sweeper's walk finds them.
func (n *nudges) retryLater(ids []uuid.UUID) {
	select {
	case <-n.done:
	case <-time.After(nudgeRetry):
		n.add(ids)
	}
}

func (n *nudges) close() {
	n.once.Do(func() { close(n.done) })
	<-n.stopped
}

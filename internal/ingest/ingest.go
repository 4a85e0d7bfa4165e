// Package ingest commits posted events and makes their deliveries in the
// same transaction (fanout.Insert): a batch post as it is, and concurrent
// single-event posts grouped into shared transactions (group commit). Each
// POST /v1/events still answers only after its event and its deliveries
// are committed, but a busy API commits tens of events per transaction
// instead of one each: the database's per-commit cost is what bounds
// single-event ingest. At low load a batch is one event and nothing waits:
// a batch is whatever has queued up while the previous one committed. An
// event with an Idempotency-Key is stored on its own
// (fanout.InsertOne), and so is a large one (LargeEvent): a commit of
// megabytes would hold up the small events sharing it.
//
// After each commit, the endpoints whose queues changed are nudged
// (dispatch.Nudger.Nudge) by one goroutine, off the posts' path. It merges
// the endpoints of the commits that land while it works, so under load each
// pass covers many commits. A pass the database fails is tried again; if
// the process dies first, the sweeper's walk queues their dispatch (every
// 5 s by default).
//
// A commit whose connection fails is tried again within the post's bound,
// even after the commit was sent: each event's id is made once per post,
// so a try after one that did commit finds its rows and answers with
// them, and no event is stored twice.
//
// An event Postgres rejects (sluice.RowRejected) fails alone: its batch is
// split until the event is found, and every other event, whichever tenant
// posted it, is committed (see package batch).
//
// With tracing on, each event stores the trace context of the request
// that posted it (tracing.Carry), and each traced request gets a commit
// span in its own trace (trace.go), whether its transaction was its own
// or shared with other requests.
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
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river/rivershared/startstop"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/internal/batch"
	"github.com/sluice-dev/sluice/internal/dbwait"
	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
	"github.com/sluice-dev/sluice/internal/tracing"
)

// ErrClosed is returned for events submitted before Start or after Stop.
var ErrClosed = batch.ErrClosed

// ErrOutcomeUnknown is returned by Submit when its context ends while its
// event is being committed: the event may or may not be stored.
var ErrOutcomeUnknown = batch.ErrOutcomeUnknown

// LargeEvent is the payload size above which a single event commits in a
// transaction of its own rather than in a shared group: SLUICE_MAX_PAYLOAD
// raised past its default allows up to 10 MiB, whose commit (its WAL, its
// compression) can take long enough to push the others it would share a
// transaction with past SLUICE_DB_TIMEOUT. The API's large-body turns
// start at the same size.
const LargeEvent = 1 << 20

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
	// Nudger queues the fan-out jobs of the commits and nudges their
	// endpoints: the process's, built once by app. Required: a nil Nudger
	// is a programming error.
	Nudger *dispatch.Nudger
	// Logger reports nudges that failed (the sweeper repairs them).
	Logger *slog.Logger
	// Tracing traces commits and stores each traced request's trace
	// context with its events. Nil, or off: nothing is traced or stored.
	Tracing *tracing.Provider
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
	case c.Nudger == nil:
		return c, errors.New("ingest: Config.Nudger is required")
	case c.Committers < 0:
		return c, errors.New("ingest: Committers must be positive")
	case c.MaxBatch < 0:
		return c, errors.New("ingest: MaxBatch must be positive")
	}
	return c, nil
}

// Ingester commits posted events, single ones in groups, and nudges the
// endpoints they reach. It is a startstop.Service:
// Start before the API serves, Stop after the HTTP server has shut down.
type Ingester struct {
	startstop.BaseStartStop

	st      *store.Store
	cfg     Config
	tracer  trace.Tracer                                                    // nil when tracing is off
	batcher atomic.Pointer[batch.Batcher[fanout.TenantEvent, sluice.Event]] // nil unless started
	nudges  *nudges
}

// New returns an Ingester on st that queues the jobs its commits need
// with cfg.Nudger; Start starts it.
func New(st *store.Store, cfg Config) (*Ingester, error) {
	cfg, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	i := &Ingester{st: st, cfg: cfg, nudges: newNudges(cfg.Nudger, cfg.Logger)}
	if cfg.Tracing.Enabled() {
		i.tracer = cfg.Tracing.Tracer("github.com/sluice-dev/sluice/internal/ingest")
	}
	return i, nil
}

// Start starts the group commit and the nudging loop.
func (i *Ingester) Start(ctx context.Context) error {
	ctx, shouldStart, started, stopped := i.StartInit(ctx)
	if !shouldStart {
		return nil
	}
	b := batch.New(batch.Config{
		Committers: i.cfg.Committers, MaxBatch: i.cfg.MaxBatch,
		Isolate: sluice.RowRejected, Retry: retryable, Inline: true,
	}, i.commitGroup)
	i.batcher.Store(b)
	go func() {
		started()
		defer stopped()
		i.nudges.run(ctx) // until Stop
		i.batcher.Store(nil)
		b.Close()          // the groups in flight commit
		i.nudges.pass(ctx) // and their endpoints are nudged
	}()
	return nil
}

// commitGroup commits a group of single posts, one event each.
func (i *Ingester) commitGroup(ctx context.Context, evs []fanout.TenantEvent) ([]sluice.Event, error) {
	return i.commit(ctx, evs, len(evs))
}

// commit stores the events of one or more requests in one transaction,
// hands the deliveries it made to the runs of their endpoints registered
// in this process, and passes the other endpoints to the nudging loop.
// The hand-off's sequence is read before the insert (dispatch.Nudger.Seq).
// A failure that committed nothing wraps errNothingCommitted; one after
// the commit was sent on a connection that then failed, ErrOutcomeUnknown.
// Both are tried again (retryable); a try that finds its events stored by
// an earlier one answers with them (storedBefore).
func (i *Ingester) commit(ctx context.Context, evs []fanout.TenantEvent, requests int) ([]sluice.Event, error) {
	spans := i.startCommit(ctx, evs, requests)
	seq := i.cfg.Nudger.Seq()
	try := dbwait.WatchCommit(ctx) // this try's commit, whatever ctx watched
	out, made, err := fanout.Insert(try, i.st, evs, i.cfg.Nudger)
	if err != nil && duplicate(err) {
		var stored bool
		if stored, err = i.storedBefore(try, out, err); stored {
			endCommit(spans, nil)
			return out, nil
		}
	}
	endCommit(spans, err)
	if err != nil {
		return nil, fmt.Errorf("commit group: %w", outcome(try, err))
	}
	i.nudges.add(i.cfg.Nudger.Hand(seq, made))
	return out, nil
}

// duplicate reports whether err is a unique violation (SQLSTATE 23505).
func duplicate(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// storedBefore reports whether every one of evs is stored already, which
// a unique violation (dupErr) storing them says may be so: the ids are
// made once per post (stamp), so only an earlier try of the same commit,
// whose answer was lost after it was sent (commitUnknown), can have
// stored them, and a transaction stores all of its events or none. Then
// the commit is answered as made; its deliveries were made with it and
// are left to the sweeper's walk, since the hand-off of that try was
// lost with its answer. Otherwise it returns dupErr, or the error of the
// read that looked.
func (i *Ingester) storedBefore(ctx context.Context, evs []sluice.Event, dupErr error) (bool, error) {
	ids := make([]uuid.UUID, len(evs))
	for j, ev := range evs {
		ids[j] = ev.ID
	}
	rows, err := store.Read(ctx, i.st, (*dbq.Queries).EventsByID, ids)
	switch {
	case err != nil:
		return false, fmt.Errorf("look for the events of an earlier try: %w", err)
	case len(rows) != len(ids):
		return false, dupErr
	}
	i.cfg.Logger.Info("events found stored by an earlier try whose commit's outcome was unknown", "events", len(ids))
	return true, nil
}

// errNothingCommitted marks a commit that failed on the database without
// committing anything: no connection could be made, or it broke before
// the commit was sent. The same commit may succeed on the next leader.
var errNothingCommitted = errors.New("nothing was committed")

// outcome sorts err, of a commit tried with ctx (dbwait.WatchCommit), by
// what the database may have done: nothing, when no connection could be
// made or the pool's dbwait.Tracer saw no commit sent; otherwise, unknown.
func outcome(ctx context.Context, err error) error {
	switch {
	case !sluice.Unavailable(err):
		return err
	case sluice.NotConnected(err), dbwait.NoCommitSent(ctx):
		return fmt.Errorf("%w: %w", errNothingCommitted, err)
	default:
		return commitUnknown{err}
	}
}

// commitUnknown is a commit whose connection failed after the commit was
// sent: it may or may not have been made. It is ErrOutcomeUnknown.
type commitUnknown struct{ err error }

func (e commitUnknown) Error() string {
	return "the connection failed after the commit was sent, its outcome is unknown: " + e.err.Error()
}

func (e commitUnknown) Unwrap() []error { return []error{ErrOutcomeUnknown, e.err} }

// retryable reports whether a commit that failed with err may be tried
// again as it is: it did nothing, or its outcome is unknown. The latter
// is safe because its events keep their ids across tries (stamp): a try
// after one that did commit meets its rows and answers with them
// (storedBefore), and never stores an event twice.
func retryable(err error) bool {
	return errors.Is(err, errNothingCommitted) || errors.As(err, new(commitUnknown))
}

// stamp gives a posted event its id and creation time once, before its
// first try, so that every try of its commit stores the same row.
func stamp(tenantID uuid.UUID, ev sluice.NewEvent) fanout.TenantEvent {
	return fanout.TenantEvent{TenantID: tenantID, Event: ev, ID: store.NewID(), CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
}

// SubmitBatch commits one tenant's batch of events on its own (a batch is
// a group already) and returns them as stored, in order. Its endpoints are
// nudged with the others'.
func (i *Ingester) SubmitBatch(ctx context.Context, tenantID uuid.UUID, evs []sluice.NewEvent) ([]sluice.Event, error) {
	if i.batcher.Load() == nil {
		return nil, ErrClosed
	}
	var carried []byte // one for every event of the batch
	if i.tracer != nil {
		carried = tracing.Carry(ctx)
	}
	group := make([]fanout.TenantEvent, len(evs))
	for j, ev := range evs {
		ev.TraceContext = carried
		group[j] = stamp(tenantID, ev)
	}
	var out []sluice.Event
	err := dbwait.Retry(ctx, retryable, func(ctx context.Context) error {
		var err error
		out, err = i.commit(ctx, group, 1)
		return err
	})
	return out, err
}

// Submit commits one event, possibly with others, and returns it as stored.
// An event Postgres refuses fails with an error sluice.RowRejected
// recognises; one whose ctx ends while it is being committed, with
// ErrOutcomeUnknown.
func (i *Ingester) Submit(ctx context.Context, tenantID uuid.UUID, ev sluice.NewEvent) (sluice.Event, error) {
	b := i.batcher.Load()
	if b == nil {
		return sluice.Event{}, ErrClosed
	}
	if i.tracer != nil {
		ev.TraceContext = tracing.Carry(ctx)
	}
	te := stamp(tenantID, ev)
	if len(ev.Payload) > LargeEvent {
		var out []sluice.Event
		err := dbwait.Retry(ctx, retryable, func(ctx context.Context) error {
			var err error
			out, err = i.commit(ctx, []fanout.TenantEvent{te}, 1)
			return err
		})
		switch {
		case err != nil && ctx.Err() != nil:
			return sluice.Event{}, ErrOutcomeUnknown
		case err != nil:
			return sluice.Event{}, err
		}
		return out[0], nil
	}
	return b.Submit(ctx, te) //nolint:wrapcheck // commit wraps its own
}

// SubmitIdempotent commits one event that carries an Idempotency-Key, on
// its own, and reports whether it created it: a key seen in the last
// fanout.IdempotencyWindow answers with the event it created. Its error is
// fanout's as it is: a conflict's text is the API's answer.
func (i *Ingester) SubmitIdempotent(ctx context.Context, tenantID uuid.UUID, ev sluice.NewEvent) (sluice.Event, bool, error) {
	var spans []trace.Span
	if i.tracer != nil {
		ev.TraceContext = tracing.Carry(ctx)
		spans = i.startCommit(ctx, []fanout.TenantEvent{{TenantID: tenantID, Event: ev}}, 1)
	}
	var (
		out     sluice.Event
		created bool
	)
	// Tried again whatever its outcome: a key the first try stored
	// answers with its event.
	err := dbwait.Retry(ctx, sluice.Unavailable, func(ctx context.Context) error {
		var err error
		out, created, err = fanout.InsertOne(ctx, i.st, tenantID, ev, i.cfg.Nudger)
		return err //nolint:wrapcheck // wrapped by fanout
	})
	endCommit(spans, err)
	return out, created, err //nolint:wrapcheck // wrapped by fanout
}

// nudges nudges the endpoints whose queues changed, one pass at a time,
// merging the commits added while a pass runs.
type nudges struct {
	nudger *dispatch.Nudger
	logger *slog.Logger

	mu      sync.Mutex
	pending map[uuid.UUID]struct{}
	kick    chan struct{} // holds a token while pending has endpoints
	failing bool          // the last pass failed; read and written by the loop alone
}

// nudgeTimeout bounds one pass, so that a database that stopped answering
// cannot hold up Stop.
const nudgeTimeout = 10 * time.Second

func newNudges(nudger *dispatch.Nudger, logger *slog.Logger) *nudges {
	return &nudges{nudger: nudger, logger: logger, pending: map[uuid.UUID]struct{}{}, kick: make(chan struct{}, 1)}
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

// run makes a pass each time commits are added, until ctx ends.
func (n *nudges) run(ctx context.Context) {
	for {
		select {
		case <-n.kick:
			n.pass(ctx)
		case <-ctx.Done():
			return
		}
	}
}

// nudgeRetry is the pause before a failed pass's endpoints are nudged
// again.
const nudgeRetry = 250 * time.Millisecond

// pass nudges the pending endpoints. Those it failed to reach (the
// database is down) are pending again after nudgeRetry, unless ctx has
// ended; their deliveries are committed, so nothing is lost meanwhile. The
// pass itself outlives ctx, bounded by nudgeTimeout, so that the last one
// nudges what the last commits added.
func (n *nudges) pass(ctx context.Context) {
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
	passCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), nudgeTimeout)
	defer cancel()
	err := n.nudger.Nudge(passCtx, ids)
	switch {
	case err != nil && !n.failing:
		n.logger.Warn("could not nudge dispatch for new deliveries; retrying", "endpoints", len(ids), "err", err)
	case err == nil && n.failing:
		n.logger.Info("nudging dispatch for new deliveries again")
	}
	n.failing = err != nil
	if err != nil {
		n.retryLater(ctx, ids)
	}
}

// retryLater makes ids pending again after nudgeRetry, unless ctx ends
// first (the Ingester is stopping): then the sweeper's walk finds them.
func (n *nudges) retryLater(ctx context.Context, ids []uuid.UUID) {
	t := time.NewTimer(nudgeRetry)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
		n.add(ids)
	}
}

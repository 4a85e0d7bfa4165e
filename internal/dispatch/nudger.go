package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivershared/startstop"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// A Nudger is the one way a dispatch run is started or nudged (see the
// package doc for the words): app builds one per process and passes it to
// everything that starts or wakes runs, and jobs.Queue inserts only what
// the Nudger tells it to. In a transaction it queues and unparks runs
// (Dispatch, Unpark, successor), and the other jobs a write needs
// (TxNudger); after a commit, Nudge wakes or queues. The runs of this
// process register with it while they work and linger on it. As a
// service (Start, Stop) it runs the listener, which hears wakes from
// other processes, and the alarm, which announces parked jobs as their
// waits end; a Nudger that was never started still nudges, it only hears
// no wakes and rings no alarm (an API-only process, which has no runs).
//
// A wake cannot strand a delivery: Nudge wakes only after the deliveries
// have committed, and a run leaves the Nudger before its final check
// (Worker.finish). So if the signal finds the run registered, the run's
// final check comes later and sees the deliveries; if not, Nudge queues a
// job, or finds one live, whose run sees them. A run that ends without a
// final check (a park or a yield) leaves a successor, which sees them.
type Nudger struct {
	startstop.BaseStartStop

	store *store.Store
	queue *jobs.Queue
	cfg   NudgerConfig
	alarm *alarm

	// seq counts the claims completed by registered runs (registration).
	seq atomic.Uint64

	mu        sync.Mutex
	runs      map[uuid.UUID]*registration
	lingering int
	stopping  <-chan struct{} // closed when the service stops; nil before Start

	// Poll endpoints (package poll) have no dispatch job: a nudge wakes the
	// poll requests waiting for them instead, here and (by notification)
	// in other processes. polls holds the waiting requests' wake channels;
	// pollKind remembers which endpoints are poll endpoints, which never
	// changes after an endpoint is created.
	polls    map[uuid.UUID]map[chan struct{}]struct{}
	pollKind map[uuid.UUID]bool
	stamps   pollStamps // pollstamp.go
}

// TxNudger is the Nudger's side inside a write's transaction: it queues
// the jobs the write needs, so that the data and the job that acts on it
// commit together. The process's *Nudger is the one; a test that wakes
// nothing may hand a *jobs.Queue in its place.
type TxNudger interface {
	// FanOut queues the fan-out of events to their endpoints.
	FanOut(ctx context.Context, tx pgx.Tx, eventIDs []uuid.UUID) error
	// Dispatch makes sure each endpoint has a dispatch job queued or running.
	Dispatch(ctx context.Context, tx pgx.Tx, endpointIDs []uuid.UUID) error
	// DispatchLive is Dispatch, returning the endpoints whose job was
	// already queued or running.
	DispatchLive(ctx context.Context, tx pgx.Tx, endpointIDs []uuid.UUID) ([]uuid.UUID, error)
	// Replay queues the job that replays a bulk replay request's staged
	// deliveries to the endpoint.
	Replay(ctx context.Context, tx pgx.Tx, requestID, endpointID uuid.UUID) error
	// Alert queues the email of a circuit transition.
	Alert(ctx context.Context, tx pgx.Tx, alertID uuid.UUID) error
	// MemberMail queues the email that carries a member's link to set its
	// password (purpose: member.PurposeInvite or member.PurposeReset).
	MemberMail(ctx context.Context, tx pgx.Tx, memberID uuid.UUID, purpose string) error
	// Unpark runs an endpoint's dispatch now: its parked job if it has one
	// (parkedJobID), a new one otherwise.
	Unpark(ctx context.Context, tx pgx.Tx, endpointID uuid.UUID, parkedJobID *int64) error
	// Verify queues the challenge of an endpoint (VerifyWorker).
	Verify(ctx context.Context, tx pgx.Tx, endpointID uuid.UUID) error
}

var _ TxNudger = (*Nudger)(nil)

// maxPollKinds bounds the Nudger's memory of which endpoints are poll
// endpoints; past it, it forgets and asks again.
const maxPollKinds = 100_000

// NudgerConfig configures a Nudger.
type NudgerConfig struct {
	// MaxLinger is how many runs may linger at once, so that lingering
	// never starves the dispatch queue; 0 turns lingering off.
	MaxLinger int
	// ConnConfig is the database the listener hears wakes on, on a
	// connection of its own; nil: it does not listen.
	ConnConfig *pgx.ConnConfig
	// Clock is what the alarm and the listener's reconnects wait on
	// (default: the system's); a run lingers on its own Config.Clock.
	Clock  Clock
	Logger *slog.Logger
}

// Resolve returns the configuration with defaults applied.
func (c NudgerConfig) Resolve() NudgerConfig {
	if c.Clock == nil {
		c.Clock = jobs.SystemClock
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// NewNudger returns a Nudger that looks jobs up and notifies through st
// and inserts them with queue.
func NewNudger(st *store.Store, queue *jobs.Queue, cfg NudgerConfig) *Nudger {
	cfg = cfg.Resolve()
	return &Nudger{
		store: st, queue: queue, cfg: cfg,
		alarm:    newAlarm(cfg.Clock, cfg.Logger),
		runs:     map[uuid.UUID]*registration{},
		polls:    map[uuid.UUID]map[chan struct{}]struct{}{},
		pollKind: map[uuid.UUID]bool{},
		stamps:   pollStamps{watched: map[uuid.UUID]uint64{}},
	}
}

// Start runs the listener (when ConnConfig is set) and the alarm until
// Stop, or until ctx ends.
func (n *Nudger) Start(ctx context.Context) error {
	ctx, shouldStart, started, stopped := n.StartInit(ctx)
	if !shouldStart {
		return nil
	}
	n.mu.Lock()
	n.stopping = ctx.Done()
	n.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { n.alarm.run(ctx) })
	if n.cfg.ConnConfig != nil {
		wg.Go(func() { n.listen(ctx) })
	}
	started()
	go func() {
		defer stopped()
		wg.Wait()
	}()
	return nil
}

// Nudge is called once deliveries to these endpoints have committed: it
// wakes each endpoint's live run, by a signal to a run registered here
// and by a notification for a run in another process, and queues a job
// for each endpoint that has none live.
//
// No delivery is stranded by a dispatch job finishing meanwhile: a job
// finishes only in a transaction that locks its endpoint row FOR UPDATE,
// which conflicts with the KEY SHARE lock each delivery insert took. So
// either the job's final check ran after the deliveries committed and saw
// them, or the deliveries waited for the job's completion to commit, and
// the lookup then finds no live job and queues one. The lookup answers as
// River's unique insert would, on the same states (jobs.DispatchArgs);
// River's uniqueness still settles a race between two inserts. A crash
// between the two commits is covered by the sweeper's walk; the inserts
// commit asynchronously for the same reason.
//
// The new jobs are inserted in one transaction, so River announces them
// to its fetchers with one notification at its commit: inserted one
// transaction each, the second of two jobs inserted within River's
// notification cooldown (FetchCooldown) was announced by no one and waited
// for the dispatch queue's poll. River's unique insert locks a live job's
// row, in endpoint order (jobs.Queue.DispatchLive); with the live ones
// looked up first, that happens only when a job became live in between.
//
// A poll endpoint gets no job: its waiting poll requests are woken, here
// by a signal and elsewhere by the notification.
func (n *Nudger) Nudge(ctx context.Context, endpointIDs []uuid.UUID) error {
	rest := n.signal(endpointIDs)
	if len(rest) == 0 {
		return nil
	}
	rest, polled, err := n.splitPoll(ctx, nil, rest)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		return n.notify(ctx, polled)
	}
	live, err := jobs.LiveDispatch(ctx, n.store.Pool(), rest)
	if err != nil {
		return fmt.Errorf("look up live dispatch jobs: %w", err)
	}
	var wake, queue []uuid.UUID
	for _, id := range rest {
		if live[id] {
			wake = append(wake, id)
		} else {
			queue = append(queue, id)
		}
	}
	if len(queue) > 0 {
		err := n.store.InAsyncTx(ctx, func(tx store.Tx) error {
			l, err := n.queue.DispatchLive(ctx, tx, queue)
			wake = append(wake, l...)
			return err
		})
		if err != nil {
			return fmt.Errorf("queue dispatch jobs: %w", err)
		}
	}
	return n.notify(ctx, append(wake, polled...))
}

// pollEndpoints returns which of ids are poll endpoints; in tx when it is
// not nil (a caller inside a transaction asks on its own connection rather
// than wait for another).
func (n *Nudger) pollEndpoints(ctx context.Context, tx pgx.Tx, ids []uuid.UUID) ([]uuid.UUID, error) {
	if tx != nil {
		return dbq.New(tx).PollEndpoints(ctx, ids) //nolint:wrapcheck // wrapped by splitPoll
	}
	return store.Read(ctx, n.store, (*dbq.Queries).PollEndpoints, ids) //nolint:wrapcheck // wrapped by splitPoll
}

// splitPoll separates the poll endpoints from the others, asking the
// database (in tx, if not nil) only about endpoints it has not seen.
func (n *Nudger) splitPoll(ctx context.Context, tx pgx.Tx, endpointIDs []uuid.UUID) (push, poll []uuid.UUID, err error) {
	isPoll := make(map[uuid.UUID]bool, len(endpointIDs))
	var unknown []uuid.UUID
	n.mu.Lock()
	for _, id := range endpointIDs {
		kind, seen := n.pollKind[id]
		if !seen {
			unknown = append(unknown, id)
		}
		isPoll[id] = kind
	}
	n.mu.Unlock()
	if len(unknown) > 0 {
		polls, err := n.pollEndpoints(ctx, tx, unknown)
		if err != nil {
			return nil, nil, fmt.Errorf("look up poll endpoints: %w", err)
		}
		for _, id := range polls {
			isPoll[id] = true
		}
		n.mu.Lock()
		if len(n.pollKind)+len(unknown) > maxPollKinds {
			clear(n.pollKind)
		}
		for _, id := range unknown {
			n.pollKind[id] = isPoll[id]
		}
		n.mu.Unlock()
	}
	for _, id := range endpointIDs {
		if isPoll[id] {
			poll = append(poll, id)
		} else {
			push = append(push, id)
		}
	}
	return push, poll, nil
}

// JoinPoll registers a poll request waiting for deliveries to a poll
// endpoint: a nudge of the endpoint, in this process or (when the Nudger
// listens) in another, sends a wake on the channel. Call leave when done.
// Join before reading, so that a delivery committed after the read wakes
// the wait.
func (n *Nudger) JoinPoll(endpointID uuid.UUID) (wakes <-chan struct{}, leave func()) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pollKind[endpointID] = true
	waiting := n.polls[endpointID]
	if waiting == nil {
		waiting = map[chan struct{}]struct{}{}
		n.polls[endpointID] = waiting
	}
	waiting[ch] = struct{}{}
	return ch, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if _, ok := waiting[ch]; !ok {
			return // left already
		}
		delete(waiting, ch)
		if len(waiting) == 0 {
			delete(n.polls, endpointID)
		}
	}
}

// signal wakes the runs registered here of these endpoints and returns
// the endpoints that have none here.
func (n *Nudger) signal(endpointIDs []uuid.UUID) []uuid.UUID {
	var rest []uuid.UUID
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, id := range endpointIDs {
		n.stampLocked(id)
		for wakes := range n.polls[id] {
			select {
			case wakes <- struct{}{}:
			default:
			}
		}
		if !n.wakeLocked(id, 0, nil) {
			rest = append(rest, id)
		}
	}
	return rest
}

// wakeLocked wakes the endpoint's run registered here, handing it the
// deliveries made after seq (nil: not known), and reports whether there
// is one. Under mu.
func (n *Nudger) wakeLocked(endpointID uuid.UUID, seq uint64, made []Claimed) bool {
	r, ok := n.runs[endpointID]
	if !ok {
		return false
	}
	r.hand(seq, made)
	select {
	case r.wakes <- struct{}{}:
	default: // already woken
	}
	return true
}

// wakeChannel is the Postgres notification channel that names, as
// comma-separated ids, endpoints whose live run should claim now, or
// poll endpoints whose readers should look again. The triggers of
// 00032_poll_changes.sql send on it by name too.
const wakeChannel = "sluice_dispatch_wake"

// wakePayloadIDs keeps a notification's payload under Postgres's
// 8,000-byte limit.
const wakePayloadIDs = 200

// notify wakes the endpoints' runs in every process, in as few
// notifications as fit.
func (n *Nudger) notify(ctx context.Context, endpointIDs []uuid.UUID) error {
	err := notifyIDs(endpointIDs, func(payload string) error {
		return store.Exec(ctx, n.store, (*dbq.Queries).Notify, dbq.NotifyParams{Channel: wakeChannel, Payload: payload})
	})
	if err != nil {
		return fmt.Errorf("notify dispatch runs: %w", err)
	}
	return nil
}

// notifyIDs sends endpoint ids through send in payloads of at most
// wakePayloadIDs.
func notifyIDs(endpointIDs []uuid.UUID, send func(payload string) error) error {
	for len(endpointIDs) > 0 {
		k := min(len(endpointIDs), wakePayloadIDs)
		ids := make([]string, k)
		for i, id := range endpointIDs[:k] {
			ids[i] = id.String()
		}
		if err := send(strings.Join(ids, ",")); err != nil {
			return err
		}
		endpointIDs = endpointIDs[k:]
	}
	return nil
}

// join registers a run of the endpoint and returns its registration, on
// which its wakes and hand-offs arrive, or nil when lingering is off or
// another run of the endpoint is registered. A new run must claim first.
func (n *Nudger) join(endpointID uuid.UUID) *registration {
	if n.cfg.MaxLinger <= 0 {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, taken := n.runs[endpointID]; taken {
		return nil
	}
	r := &registration{wakes: make(chan struct{}, 1), claimed: n.seq.Load(), unknown: true}
	n.runs[endpointID] = r
	return r
}

// leave unregisters the run registered as r; it may be called again.
func (n *Nudger) leave(endpointID uuid.UUID, r *registration) {
	if r == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.runs[endpointID] == r {
		delete(n.runs, endpointID)
	}
}

// lingerFor is how long a run with nothing due lingers.
const lingerFor = time.Second

// linger waits up to lingerFor (within deadline) for a wake of r's run,
// and reports whether one came. It gives up when ctx ends, when the Nudger
// stops, and at once when MaxLinger runs linger already.
func (n *Nudger) linger(ctx context.Context, clock Clock, r *registration, deadline time.Time) bool {
	wait := min(lingerFor, deadline.Sub(clock.Now()))
	if r == nil || wait <= 0 {
		return false
	}
	wakes := r.wakes
	select {
	case <-wakes: // woken while the run was busy
		return true
	default:
	}
	n.mu.Lock()
	if n.lingering >= n.cfg.MaxLinger {
		n.mu.Unlock()
		return false
	}
	n.lingering++
	stopping := n.stopping
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.lingering--
		n.mu.Unlock()
	}()

	elapsed, stop := clock.After(wait)
	defer stop()
	select {
	case <-wakes:
		return true
	case <-elapsed:
		return false
	case <-ctx.Done():
		return false
	case <-stopping:
		return false
	}
}

// parked sets the alarm for a park of the endpoint that ends at until,
// which then asks for the endpoint's dispatch job (jobs.Queue.DispatchNow).
func (n *Nudger) parked(endpointID uuid.UUID, until time.Time) {
	n.alarm.set(endpointID, until, n.queue.DispatchNow)
}

// successor queues, in tx, the next dispatch job of a run that parks or
// yields, due at at (at once for a zero time), and returns its id
// (jobs.Queue.DispatchAt).
func (n *Nudger) successor(ctx context.Context, tx pgx.Tx, args jobs.DispatchArgs, at time.Time) (int64, error) {
	return n.queue.DispatchAt(ctx, tx, args, at) //nolint:wrapcheck // jobs says what failed
}

// Verify queues an endpoint's challenge, in tx (jobs.Queue.Verify).
func (n *Nudger) Verify(ctx context.Context, tx pgx.Tx, endpointID uuid.UUID) error {
	return n.queue.Verify(ctx, tx, endpointID) //nolint:wrapcheck // jobs says what failed
}

// Unpark runs an endpoint's dispatch now, in tx: its parked job if it has
// one (parkedJobID), a new one otherwise (jobs.Queue.Unpark).
func (n *Nudger) Unpark(ctx context.Context, tx pgx.Tx, endpointID uuid.UUID, parkedJobID *int64) error {
	return n.queue.Unpark(ctx, tx, endpointID, parkedJobID) //nolint:wrapcheck // jobs says what failed
}

// DispatchLive is Dispatch, returning the push endpoints whose job was
// already queued or running.
func (n *Nudger) DispatchLive(ctx context.Context, tx pgx.Tx, endpointIDs []uuid.UUID) ([]uuid.UUID, error) {
	push, polled, err := n.splitPoll(ctx, tx, endpointIDs)
	if err != nil {
		return nil, err
	}
	if err := n.notifyPollIn(ctx, tx, polled); err != nil {
		return nil, err
	}
	return n.queue.DispatchLive(ctx, tx, push) //nolint:wrapcheck // jobs says what failed
}

// DeadKinds answers which of kinds have jobs whose runs died
// (jobs.DeadKinds), for the sweeper to replace.
func (n *Nudger) DeadKinds(ctx context.Context, kinds []string, grace time.Duration) ([]string, error) {
	return jobs.DeadKinds(ctx, n.store.Pool(), kinds, grace) //nolint:wrapcheck // jobs says what failed
}

// ReplaceDead replaces up to limit jobs of kinds whose runs died with new
// ones (jobs.Queue.ReplaceDead), for the sweeper.
func (n *Nudger) ReplaceDead(ctx context.Context, kinds []string, grace time.Duration, limit int) (int, error) {
	return n.queue.ReplaceDead(ctx, n.store.Pool(), kinds, grace, limit) //nolint:wrapcheck // jobs says what failed
}

// FanOut queues, in tx, the fan-out of events to their endpoints.
func (n *Nudger) FanOut(ctx context.Context, tx pgx.Tx, eventIDs []uuid.UUID) error {
	return n.queue.FanOut(ctx, tx, eventIDs) //nolint:wrapcheck // jobs says what failed
}

// Replay queues, in tx, the job that replays a bulk replay request's
// staged deliveries to the endpoint.
func (n *Nudger) Replay(ctx context.Context, tx pgx.Tx, requestID, endpointID uuid.UUID) error {
	return n.queue.Replay(ctx, tx, requestID, endpointID) //nolint:wrapcheck // jobs says what failed
}

// Alert queues, in tx, the email of an operational event to its
// endpoint's owner.
func (n *Nudger) Alert(ctx context.Context, tx pgx.Tx, alertID uuid.UUID) error {
	return n.queue.Alert(ctx, tx, alertID) //nolint:wrapcheck // jobs says what failed
}

// MemberMail queues, in tx, the email that carries a member's link to
// set its password.
func (n *Nudger) MemberMail(ctx context.Context, tx pgx.Tx, memberID uuid.UUID, purpose string) error {
	return n.queue.MemberMail(ctx, tx, memberID, purpose) //nolint:wrapcheck // jobs says what failed
}

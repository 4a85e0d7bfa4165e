// Package dispatch sends each endpoint's queued deliveries, and owns
// every way a dispatch run is started or nudged: the Nudger.
//
// Its words (dispatch job, live, run, step, claim, record, unlocked path,
// blocked, park, yield, finish, successor, linger, hand-off, queue, wake,
// nudge, unpark, alarm, announce, lease, line, head) each mean one thing, defined
// in the glossary of docs/architecture.md. Where each lives here:
//
//   - A run is Worker.Work: it claims, sends and records batches until
//     nothing is due, its endpoint is blocked (planClaim), or its budget
//     (Config.Budget) is spent, then finishes, parks or yields
//     (Worker.finish, park, yield; each queues its successor, if any,
//     with Worker.successor). Draining a backlog on the unlocked path, it
//     claims a batch while it sends the one before and records in the
//     background (overlap.go).
//   - A step is a StepTx (steptx.go), written top to bottom in step.go;
//     its decisions are pure functions of values in flow.go and retry.go.
//   - Worker.claim reads on the unlocked path (DB.ClaimUnlocked, the
//     claims of concurrent runs group-committed by the claimer) or under
//     the endpoint's lock (claimLocked); neither locks a delivery
//     (ClaimDueDeliveries in queries/dispatch.sql says why). A FIFO
//     endpoint's claim takes only the heads of its lines (fifo.go).
//   - Worker.record stores a batch on the unlocked path (DB.RecordUnlocked,
//     group-committed by the recorder) or under the lock (recordLocked):
//     package flow decides what the batch did to the flow state, flow.go
//     applies it and flowstate.go keeps it; flowPolicy.disable decides
//     whether the endpoint is disabled (a 410 Gone, or Config.DisableAfter
//     of failures); opEvents builds the operational events posted in the
//     same transaction; observeBatch logs and counts what the batch did
//     once it has committed.
//   - The Nudger (nudger.go) queues a dispatch job inside the caller's
//     transaction (Nudger.Dispatch), wakes live runs (a signal in this
//     process; a Postgres notification, heard by its listener in listen.go,
//     in the others), lets a run linger, and keeps the alarm (alarm.go)
//     that announces a parked job when its park ends. Fan-out, ingest and
//     the sweeper call Nudger.Nudge. A poll endpoint (package poll) has no
//     run: a nudge wakes the reads waiting for it (Nudger.JoinPoll), moves
//     its poll stamp (pollstamp.go), and queues nothing. Ingest hands a
//     lingering run the deliveries it made instead (Nudger.Hand,
//     handoff.go), which the run sends without claiming (Worker.next).
//   - CloseCircuit (circuit.go), like a change to the endpoint, unparks
//     its parked job (jobs.Queue.Unpark).
//   - A run holds a lease (Config.Leases) while it works, so that the
//     sweeper can replace the job of a dead run (jobs.ReplaceDead); a run
//     that finds its job replaced once it holds the lease ends at once
//     (jobs.Replaced). River's rescuer is the backstop, after longer than
//     Config.JobTimeout.
package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/internal/flow"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/secretbox"
	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/tracing"
)

// Config tunes the dispatcher.
type Config struct {
	Sender *send.Sender
	// DeliveryTimeout bounds one request of an endpoint without a
	// timeout of its own (sluice.DeliveryOptions).
	DeliveryTimeout time.Duration
	// Retry is the schedule of waits between failed attempts.
	Retry Retry
	// ThrottleSchedule is the wait after consecutive 429s without Retry-After.
	ThrottleSchedule []time.Duration
	// Circuit is the circuit breaker's policy.
	Circuit flow.CircuitConfig
	// DisableAfter is how long an endpoint's attempts may all fail while
	// its circuit stays open before it is disabled (default 120h;
	// negative: never).
	DisableAfter time.Duration
	// Budget is how long one run keeps sending before it yields
	// (default 5s).
	Budget time.Duration
	// Nudger is the process's: runs register with it to be woken, linger
	// on it, and set its alarm when they park. Required.
	Nudger *Nudger
	// Leases is the process's lease connection: each run holds a lock on it
	// so that the sweeper can tell a dead run from a live one. Nil turns
	// leases off (a dead run's job then waits for River's rescuer).
	Leases *jobs.LeaseHolder
	// Clock is the time runs read and wait on (default: the system's).
	Clock  Clock
	Logger *slog.Logger
	// Tracing traces each attempt whose event carries a trace context
	// (trace.go). Nil, or off: attempts are not traced.
	Tracing *tracing.Provider
}

// Defaults.
const (
	defaultBudget       = 5 * time.Second
	defaultJitter       = 0.2
	DefaultDisableAfter = 120 * time.Hour
)

// Resolve returns the configuration with defaults applied, or an error if
// it cannot work. Everything derived from it (JobTimeout) must be computed
// from the resolved value. The Nudger is checked by NewWorker, since it is
// made with the River client that JobTimeout configures.
func (c Config) Resolve() (Config, error) {
	c.Budget = cmp.Or(c.Budget, defaultBudget)
	c.Retry.Jitter = cmp.Or(c.Retry.Jitter, defaultJitter)
	c.Circuit.MaxProbe = cmp.Or(c.Circuit.MaxProbe, flow.DefaultMaxProbe)
	c.DisableAfter = cmp.Or(c.DisableAfter, DefaultDisableAfter)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = jobs.SystemClock
	}
	switch {
	case c.Sender == nil:
		return c, errors.New("dispatch: Sender is required")
	case c.DeliveryTimeout <= 0:
		return c, errors.New("dispatch: DeliveryTimeout must be positive")
	case c.Budget < 0:
		return c, errors.New("dispatch: Budget must be positive")
	}
	return c, nil
}

// Worker runs jobs.DispatchArgs.
type Worker struct {
	river.WorkerDefaults[jobs.DispatchArgs]
	db       *DB
	cfg      Config
	flow     flowPolicy
	recorder *recorder
	claimer  *claimer
	tokens   *tokens             // the auth option's (oauth.go)
	payloads *secretbox.Payloads // opens sealed payloads, seals response bodies when sealing
	large    *sharedPayloads     // the large payloads in flight (large.go)
	senders  *senders            // the goroutines a batch's sends run on (senders.go)
	tracer   trace.Tracer        // nil when tracing is off
	stopping context.Context     // done once Stop is called
	stop     context.CancelFunc
}

// NewWorker returns a dispatch worker.
func NewWorker(st *store.Store, cfg Config) (*Worker, error) {
	cfg, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	if cfg.Nudger == nil {
		return nil, errors.New("dispatch: Nudger is required")
	}
	stopping, stop := context.WithCancel(context.Background())
	db := NewDB(st)
	w := &Worker{
		db: db, cfg: cfg, recorder: newRecorder(db.RecordUnlocked, 2), claimer: newClaimer(db.ClaimUnlockedMany, 2),
		stopping: stopping, stop: stop, tokens: newTokens(st, cfg.Sender, cfg.Clock), payloads: st.Payloads(),
		large: newSharedPayloads(keepBytes), senders: newSenders(),
		flow: flowPolicy{throttle: cfg.ThrottleSchedule, circuit: cfg.Circuit, disableAfter: max(cfg.DisableAfter, 0)},
	}
	if cfg.Tracing.Enabled() {
		w.tracer = cfg.Tracing.Tracer("github.com/sluice-dev/sluice/internal/dispatch")
	}
	return w, nil
}

// Stop asks every run to yield (its successor is picked up by another
// worker process) after the requests it has in flight, instead of
// waiting, lingering or claiming more: call it when the process begins to
// shut down, before River stops.
func (w *Worker) Stop() { w.stop() }

// Close stops the worker's claimer, attempt recorder and idle send
// goroutines; call it after River has stopped.
func (w *Worker) Close() {
	w.claimer.close()
	w.recorder.close()
	w.senders.close()
}

// JobTimeout is the longest one dispatch run of a resolved configuration
// may take: its budget (with up to a fifth of jitter) plus one last batch of
// requests, as long as an endpoint's timeout may be, and its record.
// River's rescuer must wait longer than this.
func (c Config) JobTimeout() time.Duration {
	return c.Budget*6/5 + max(c.DeliveryTimeout, sluice.MaxTimeoutSeconds*time.Second) + 5*time.Second
}

// Timeout implements river.Worker.
func (w *Worker) Timeout(*river.Job[jobs.DispatchArgs]) time.Duration { return w.cfg.JobTimeout() }

// NextRetry implements river.Worker: a failed run (the database was
// unreachable) is retried within seconds, not after River's default backoff.
func (w *Worker) NextRetry(job *river.Job[jobs.DispatchArgs]) time.Time {
	return w.cfg.Clock.Now().Add(jobs.Backoff(job.Attempt))
}

// soon is the longest wait (for a token, a retry, a throttle or a probe) a
// dispatch run sleeps through itself; longer ones end or park the run.
const soon = time.Second

// Work sends the endpoint's due deliveries until none is due, the endpoint
// is blocked, or the budget is spent. A failure is logged with the endpoint
// and counted; River retries the job soon (NextRetry).
func (w *Worker) Work(ctx context.Context, job *river.Job[jobs.DispatchArgs]) error {
	err := w.run(ctx, job)
	if err != nil && !errors.Is(err, &river.JobSnoozeError{}) {
		metrics.JobErrors.WithLabelValues("dispatch").Inc()
		w.cfg.Logger.WarnContext(ctx, "dispatch run failed; retrying soon",
			"endpoint_id", job.Args.EndpointID, "job_id", job.ID, "attempt", job.Attempt, "err", err)
	}
	return err
}

func (w *Worker) run(ctx context.Context, job *river.Job[jobs.DispatchArgs]) (err error) {
	endpointID := job.Args.EndpointID
	held, err := w.takeLease(ctx, job.ID)
	if err != nil {
		return err
	}
	defer held.Release()
	// The batch recorded in the background (pendingRecord) and the batch
	// claimed early (earlyClaim), if any; both settle before the lease is
	// let go.
	var pending pendingRecord
	var early *earlyClaim
	defer func() {
		early.drop()
		if rerr := pending.wait(); rerr != nil && err == nil {
			err = fmt.Errorf("record: %w", rerr)
		}
	}()
	if replaced, err := w.replaced(ctx, job.ID); err != nil || replaced {
		return err
	}
	clock, nudger := w.cfg.Clock, w.cfg.Nudger
	queue := nudger
	deadline := w.deadline()
	reg := nudger.join(endpointID)
	defer func() { nudger.leave(endpointID, reg) }()
	var known knownTarget
	// Waits end early when the worker is stopping; requests and database
	// calls keep the job's own ctx.
	waitCtx, cancelWait := context.WithCancel(ctx)
	defer cancelWait()
	defer context.AfterFunc(w.stopping, cancelWait)()
	drained := false  // the last claim took every due delivery, and they are recorded
	lingered := false // and the run lingered since, and was woken: it may take a hand-off
	// Where the next claim starts: after the last full claim's deliveries,
	// all recorded (their index entries stay until vacuum; see
	// ClaimDueDeliveries). A claim that comes up short, and every new run,
	// starts from the front, so a delivery that lands behind the position
	// (a fan-out that committed late) waits at most for the backlog ahead.
	var after Position
	fifo := false        // the endpoint is FIFO, as the last claim read it
	var ahead *readAhead // the large payloads read for the batch claimed next
	defer func() { ahead.release() }()
	for clock.Now().Before(deadline) && w.stopping.Err() == nil {
		if err := held.Check(); err != nil {
			return fmt.Errorf("check lease: %w", err) // the sweeper may have replaced the job already
		}
		// A claim from the front, and lingering, would find the last
		// batch due still until its record commits.
		if after == (Position{}) || fifo {
			if err := pending.wait(); err != nil {
				return fmt.Errorf("record: %w", err)
			}
		}
		// Every delivery made since that claim came with a wake (Nudger),
		// so linger for one instead of claiming again; the final check
		// covers a wake lost.
		if drained {
			lingered = nudger.linger(waitCtx, clock, reg, deadline)
			if !lingered {
				finished, err := w.end(ctx, job, &reg)
				if err != nil || finished {
					return err
				}
			}
		}
		var handed []Claimed
		if lingered {
			handed = nudger.take(reg)
		}
		drained, lingered = false, false
		target, plan, claimed, err := w.next(ctx, endpointID, after, clock.Now(), &known, reg, handed, early)
		after, early = Position{}, nil
		if errors.Is(err, sluice.ErrNotFound) {
			return nil // endpoint deleted, and its deliveries with it
		}
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		fifo = target.FIFO
		if len(claimed.Deliveries) == 0 { // parking, finishing and lingering look for due deliveries too
			if err := pending.wait(); err != nil {
				return fmt.Errorf("record: %w", err)
			}
		}
		switch {
		case target.Disabled:
			return nil // enabling it again queues a dispatch (control.UpdateEndpoint)
		case len(claimed.Deliveries) > 0:
			batchCounter(claimed.Handed).Inc()
			next := w.readAheadFor(ctx, target, plan, claimed)
			early = w.claimEarly(ctx, endpointID, plan, claimed, known, reg)
			sent := w.sendBatch(ctx, target, claimed.Deliveries)
			ahead.release() // its payloads are sent
			ahead = next
			// Only a run draining a backlog (its next batch claimed early)
			// records in the background.
			flowChanged, err := w.record(ctx, target, sent, queue, &pending, early != nil)
			if err != nil {
				return fmt.Errorf("record: %w", err)
			}
			if n := len(claimed.Deliveries); n == plan.n && len(sent) == n && !claimed.Handed {
				after = claimed.Deliveries[n-1].Position()
			}
			if flowChanged {
				known = knownTarget{} // read the endpoint again before the next claim
			}
			// A FIFO line's next delivery is due once its head is
			// recorded, with no wake: claim again.
			drained = reg != nil && !flowChanged && !fifo && len(claimed.Deliveries) < plan.n
		case plan.blocked():
			// A wait under a second is slept through; a longer one (a
			// throttle, an open circuit, a slow rate limit) parks the
			// run: its successor is due when the wait ends, and closing
			// the circuit or changing the endpoint unparks it.
			if sleepIfSoon(waitCtx, clock, plan.wait(clock.Now()), deadline) {
				continue
			}
			parked, err := w.park(ctx, job, queue)
			if err != nil {
				return fmt.Errorf("park: %w", err)
			}
			if parked {
				return nil
			}
		default:
			if waitForSoonDue(waitCtx, clock, claimed.NextDue, deadline) {
				continue
			}
			if lingered = nudger.linger(waitCtx, clock, reg, deadline); lingered {
				continue
			}
			finished, err := w.end(ctx, job, &reg)
			if err != nil || finished {
				return err
			}
		}
	}
	// Budget spent, or the worker is stopping: finish, or yield to a
	// successor queued behind other work. A successor is committed (and
	// can be fetched) at once, where a snooze would wait for River's
	// completer. Leave the Nudger first: once the job ends, a wake must
	// not be taken by this run any more.
	nudger.leave(endpointID, reg)
	early.drop()
	if err := pending.wait(); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	if err := w.yield(ctx, job, queue, fifo); err != nil {
		return fmt.Errorf("yield: %w", err)
	}
	return nil
}

// end ends the run if nothing is due (finish), having left the Nudger
// first (see Nudger). If something became due while it looked, it joins
// the Nudger again, with *reg its new registration, and reports false: go
// on.
func (w *Worker) end(ctx context.Context, job *river.Job[jobs.DispatchArgs], reg **registration) (bool, error) {
	endpointID := job.Args.EndpointID
	w.cfg.Nudger.leave(endpointID, *reg)
	finished, err := w.finish(ctx, job)
	if err != nil {
		return false, fmt.Errorf("finish: %w", err)
	}
	if !finished {
		*reg = w.cfg.Nudger.join(endpointID)
	}
	return finished, nil
}

// deadline is when a run starting now yields: after its budget, give or
// take a fifth, so endpoints that started together do not all yield at
// once.
func (w *Worker) deadline() time.Time {
	return w.cfg.Clock.Now().Add(time.Duration(float64(w.cfg.Budget) * (0.8 + 0.4*rand.Float64())))
}

// takeLease takes the run's lease (nothing when leases are off).
func (w *Worker) takeLease(ctx context.Context, jobID int64) (runLease, error) {
	if w.cfg.Leases == nil {
		return noLease{}, nil
	}
	l, err := w.cfg.Leases.Acquire(ctx, jobID)
	if err != nil {
		return nil, fmt.Errorf("take lease: %w", err)
	}
	return l, nil
}

// replaced reports whether the run's job was replaced before the run took
// its lease (jobs.Replaced), in which case the run ends at once: the
// replacement's run serves the endpoint. Without leases no job is
// replaced.
func (w *Worker) replaced(ctx context.Context, jobID int64) (bool, error) {
	if w.cfg.Leases == nil {
		return false, nil
	}
	replaced, err := jobs.Replaced(ctx, w.db.st.Pool(), jobID)
	if err != nil {
		return false, fmt.Errorf("take lease: %w", err)
	}
	if replaced {
		w.cfg.Logger.InfoContext(ctx, "dispatch run ends: its job was replaced before it took its lease", "job_id", jobID)
	}
	return replaced, nil
}

// runLease is a run's *jobs.Lease, or noLease.
type runLease interface {
	Check() error
	Release()
}

type noLease struct{}

func (noLease) Check() error { return nil }
func (noLease) Release()     {}

// minDueWait is the shortest wait for a delivery the claim found not yet
// due by the database's clock but due by this process's, a hair ahead:
// without it the run could spin between the two.
const minDueWait = 20 * time.Millisecond

// waitForSoonDue sleeps until next, when the claim's endpoint will have a
// delivery due (nil: none queued), if that is soon and within the run's
// deadline, and reports whether it did. The sleep ends early when ctx does.
func waitForSoonDue(ctx context.Context, clock Clock, next *time.Time, deadline time.Time) bool {
	if next == nil {
		return false
	}
	return sleepIfSoon(ctx, clock, max(next.Sub(clock.Now()), minDueWait), deadline)
}

// sleepIfSoon sleeps on clock for wait if it is at most soon and ends
// before the deadline, and reports whether it did.
func sleepIfSoon(ctx context.Context, clock Clock, wait time.Duration, deadline time.Time) bool {
	if wait > soon || clock.Now().Add(wait).After(deadline) {
		return false
	}
	if wait <= 0 {
		return true
	}
	elapsed, stop := clock.After(wait)
	defer stop()
	select {
	case <-elapsed:
		return true
	case <-ctx.Done():
		return false
	}
}

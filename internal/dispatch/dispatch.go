// Package dispatch sends each endpoint's queued deliveries. One River job per
// endpoint (jobs.DispatchArgs, unique while queued or running) claims that
// endpoint's due deliveries in batches — as many as its rate limit, circuit
// and max_in_flight allow (flow.go) — sends them concurrently, records every
// attempt, and ends when nothing is due, in the same transaction that
// re-checks the queue with the endpoint row locked against fan-out, so no
// delivery is ever left without a dispatcher. A throttled endpoint or an
// open circuit parks the job until it lifts; retries that come due later are
// picked up by the sweeper (sweep.go). Each step of a run (claim, record,
// park, finish, hand over) is one transaction against store.DispatchTx,
// written top to bottom in step.go; its decisions are plain functions of
// values in flow.go and retry.go.
//
// Four words name the ways a dispatch is brought about, each for one thing.
// To dispatch an endpoint is to queue its dispatch job (jobs.Queue.Dispatch,
// unique, so a no-op when one is live; DispatchAt for a successor due
// later). To park is to end a blocked run with its successor due when the
// block lifts (Worker.park); to unpark is to make that parked job due now
// (jobs.Queue.Unpark, when the endpoint changes or its circuit is closed by
// hand). To wake is to signal a run that is already live, lingering with
// nothing due, that new deliveries have come: in this process through the
// Waker (Waker.Wake), in other processes through a Postgres notification
// (store.NotifyDispatchWake, heard by Waker.Listen). store.DispatchOrWake,
// what fan-out and the sweeper call, does the two: it dispatches each
// endpoint and wakes the runs of those whose job was already live. To hand
// over is to wake a run in this process with the new deliveries themselves
// (Waker.Hand, from ingest), which it may send without claiming them.
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

	"github.com/sluice-dev/sluice/internal/flow"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// Config tunes the dispatcher.
type Config struct {
	Sender *send.Sender
	// DeliveryTimeout bounds one request; it sizes the job's timeout.
	DeliveryTimeout time.Duration
	// Retry is the schedule of waits between failed attempts.
	Retry Retry
	// ThrottleSchedule is the wait after consecutive 429s without Retry-After.
	ThrottleSchedule []time.Duration
	// Circuit is the circuit breaker's policy.
	Circuit flow.CircuitConfig
	// Budget is how long one job run keeps sending before it yields its
	// worker slot and is queued again (default 5s).
	Budget time.Duration
	// Waker lets runs with nothing due linger for fan-out in this process;
	// nil turns lingering off.
	Waker *Waker
	// Leases is the process's lease connection: each run holds a lock on it
	// so that the sweeper can tell a dead run from a live one. Nil turns
	// leases off (a dead run's job then waits for River's rescuer).
	Leases *jobs.LeaseHolder
	// Clock is the time runs read and wait on (default: the system's).
	Clock  Clock
	Logger *slog.Logger
}

// Budget's default.
const defaultBudget = 5 * time.Second

// Resolve returns the configuration with defaults applied, or an error if
// it cannot work. Everything derived from it (JobTimeout) must be computed
// from the resolved value.
func (c Config) Resolve() (Config, error) {
	c.Budget = cmp.Or(c.Budget, defaultBudget)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = realClock{}
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
	store    *store.Store
	cfg      Config
	flow     flowPolicy
	recorder *recorder
	claimer  *claimer
	alarm    *alarm
	stopping context.Context // done once Stop is called
	stop     context.CancelFunc
}

// NewWorker returns a dispatch worker.
func NewWorker(st *store.Store, cfg Config) (*Worker, error) {
	cfg, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	stopping, stop := context.WithCancel(context.Background())
	return &Worker{
		store: st, cfg: cfg, recorder: newRecorder(st.RecordPlain, 2), claimer: newClaimer(st.ClaimPlainMany, 2),
		alarm: newAlarm(cfg.Clock, cfg.Logger), stopping: stopping, stop: stop,
		flow: flowPolicy{throttle: cfg.ThrottleSchedule, circuit: cfg.Circuit},
	}, nil
}

// Stop asks every run to hand its endpoint over to a successor job (which
// another worker process picks up) after the requests it has in flight,
// instead of waiting, lingering or claiming more: call it when the process
// begins to shut down, before River stops.
func (w *Worker) Stop() { w.stop() }

// Close stops the worker's claimer, attempt recorder and alarm; call it
// after River has stopped.
func (w *Worker) Close() {
	w.claimer.close()
	w.recorder.close()
	w.alarm.close()
}

// JobTimeout is the longest one dispatch run of a resolved configuration
// may take: its budget (with up to a fifth of jitter) plus one last batch of
// requests and its record. River's rescuer must wait longer than this.
func (c Config) JobTimeout() time.Duration {
	return c.Budget*6/5 + c.DeliveryTimeout + 5*time.Second
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

func (w *Worker) run(ctx context.Context, job *river.Job[jobs.DispatchArgs]) error {
	endpointID := job.Args.EndpointID
	held, err := w.takeLease(ctx, job.ID)
	if err != nil {
		return err
	}
	defer held.Release()
	queue := jobs.FromContext(ctx)
	clock := w.cfg.Clock
	deadline := w.deadline()
	wake := w.cfg.Waker.join(endpointID)
	defer func() { w.cfg.Waker.leave(endpointID, wake) }()
	var known knownTarget
	// Waits end early when the worker is stopping; requests and database
	// calls keep the job's own ctx.
	waitCtx, cancelWait := context.WithCancel(ctx)
	defer cancelWait()
	defer context.AfterFunc(w.stopping, cancelWait)()
	drained := false // the last claim took every due delivery, and they are recorded
	// Where the next claim starts: after the last full claim's deliveries,
	// all recorded (their index entries stay until vacuum; see
	// ClaimDueDeliveries). A claim that comes up short, and every new run,
	// starts from the front, so a delivery that lands behind the position
	// (a fan-out that committed late) waits at most for the backlog ahead.
	var after store.Position
	for clock.Now().Before(deadline) && w.stopping.Err() == nil {
		if err := held.Check(); err != nil {
			return err // the sweeper may already have handed the endpoint to another run
		}
		// Every delivery made since that claim came with a signal (see
		// Waker), so wait for one instead of claiming again; the final
		// check covers a signal lost. A signal that handed the deliveries
		// over whole spares the claim (nextBatch).
		if drained && !w.cfg.Waker.linger(waitCtx, clock, wake, deadline) {
			finished, err := w.end(ctx, job, &wake)
			if err != nil || finished {
				return err
			}
		}
		var handed []store.Claimed
		if drained {
			handed = w.cfg.Waker.take(wake)
		}
		drained = false
		target, plan, claimed, err := w.nextBatch(ctx, endpointID, after, clock.Now(), &known, wake, handed)
		after = store.Position{}
		if errors.Is(err, sluice.ErrNotFound) {
			return nil // endpoint deleted, and its deliveries with it
		}
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		switch {
		case target.Disabled:
			return nil // enabling it again queues a dispatch (store.UpdateEndpoint)
		case len(claimed.Deliveries) > 0:
			sent := w.sendBatch(ctx, target, claimed.Deliveries)
			flowChanged, err := w.record(ctx, target, sent, queue)
			if err != nil {
				return fmt.Errorf("record: %w", err)
			}
			if n := len(claimed.Deliveries); n == plan.n && len(sent) == n {
				after = claimed.Deliveries[n-1].Position()
			}
			if flowChanged {
				known = knownTarget{} // read the endpoint again before the next claim
			}
			drained = wake != nil && !flowChanged && len(claimed.Deliveries) < plan.n
		case plan.blocked():
			// A wait under a second is slept through; a longer one (a
			// throttle, an open circuit, a slow rate limit) parks the
			// endpoint: its next job is scheduled for when the wait ends,
			// and closing the circuit or changing the endpoint unparks it.
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
			if waitForSoonDue(waitCtx, clock, claimed.NextDue, deadline) || w.cfg.Waker.linger(waitCtx, clock, wake, deadline) {
				continue
			}
			finished, err := w.end(ctx, job, &wake)
			if err != nil || finished {
				return err
			}
		}
	}
	// Budget spent, or the worker is stopping: finish, or hand over to a
	// successor queued behind other work (yield). A successor is
	// committed (and can be fetched) at once, where a snooze would wait
	// for River's completer. Leave the Waker first: once the job ends,
	// fan-out must not hand deliveries to this run any more.
	w.cfg.Waker.leave(endpointID, wake)
	if err := w.yield(ctx, job, queue); err != nil {
		return fmt.Errorf("yield: %w", err)
	}
	return nil
}

// end ends the run if nothing is due (finish), having left the Waker
// first (see Waker). If something became due while it looked, it joins the
// Waker again, with *wake its new channel, and reports false: go on.
func (w *Worker) end(ctx context.Context, job *river.Job[jobs.DispatchArgs], wake **registration) (bool, error) {
	endpointID := job.Args.EndpointID
	w.cfg.Waker.leave(endpointID, *wake)
	finished, err := w.finish(ctx, job)
	if err != nil {
		return false, fmt.Errorf("finish: %w", err)
	}
	if !finished {
		*wake = w.cfg.Waker.join(endpointID)
	}
	return finished, nil
}

// deadline is when a run starting now hands over: after its budget, give
// or take a fifth, so endpoints that started together do not all hand over
// at once.
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

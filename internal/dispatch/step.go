package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// The steps of a dispatch run. Each is one transaction read top to bottom:
// the typed statements of a StepTx in the order they run, and between them
// the decisions, as pure functions of values (flow.go).

// knownTarget is an endpoint as a dispatch run last read it.
type knownTarget struct {
	target Target
	at     time.Time
}

// refreshTarget is how long a run trusts what it last read of its endpoint
// on the unlocked path; a PATCH takes effect within it.
const refreshTarget = time.Second

// unlocked reports whether nothing about the endpoint needs deciding under its
// row lock, as read less than refreshTarget ago (plain).
func (k knownTarget) unlocked(now time.Time) bool {
	return !k.at.IsZero() && now.Sub(k.at) < refreshTarget && k.plain()
}

// stale reports whether the endpoint needed nothing decided under its lock
// when last read, refreshTarget ago or more: a plain read of it
// (DB.ReadTarget) tells whether it still does, without the lock and the
// transaction of a locked claim.
func (k knownTarget) stale(now time.Time) bool {
	return !k.at.IsZero() && now.Sub(k.at) >= refreshTarget && k.plain()
}

// plain reports whether the endpoint needs nothing decided under its row
// lock: no rate limit, no throttle, a closed circuit without failures, not
// FIFO (whose claims give sequence numbers: ClaimFIFO).
func (k knownTarget) plain() bool {
	t := k.target
	return !t.Disabled && !t.FIFO && t.RateLimit == nil &&
		t.Flow.Throttle.Count == 0 && t.Flow.Breaker.Failures == 0 &&
		(t.Flow.Breaker.State == sluice.CircuitClosed || t.Flow.Breaker.State == "")
}

// next is the batch a run sends next: the deliveries handed to it (see
// registration), when it may send them without asking the database, or
// else what it claims. It may when it knows the endpoint needs nothing
// decided under its lock (knownTarget.unlocked, which also means its last
// reading of the endpoint is under refreshTarget old, so a retry that came
// due meanwhile waits at most that long) and they fit in one batch. The run
// passes handed only when it lingered on a queue with nothing else due:
// every delivery made since came with a wake.
//
// An early claim (claimEarly) the run would make the same way now is its
// batch.
func (w *Worker) next(ctx context.Context, endpointID uuid.UUID, after Position, now time.Time, known *knownTarget, reg *registration, handed []Claimed, early *earlyClaim) (Target, claimPlan, Claim, error) {
	if claimed, ok, err := early.take(after, *known, now); ok {
		if err != nil {
			return known.target, claimPlan{}, Claim{}, fmt.Errorf("unlocked claim: %w", err)
		}
		return known.target, claimPlan{n: known.target.MaxInFlight}, claimed, nil
	}
	if n := known.target.MaxInFlight; len(handed) > 0 && len(handed) <= n && known.unlocked(now) {
		return known.target, claimPlan{n: n}, Claim{Deliveries: handed, Handed: true}, nil
	}
	w.cfg.Nudger.claiming(reg)
	target, plan, claimed, err := w.claim(ctx, endpointID, after, now, known)
	w.cfg.Nudger.claimed(reg)
	return target, plan, claimed, err
}

// claim claims the endpoint's due deliveries after the position at now: on
// the unlocked path with a single read (after reading the endpoint again,
// when what the run knows of it is stale), otherwise with claimLocked,
// which decides under the endpoint's lock. The plan says why nothing was
// claimed; when the claim ran and nothing was due, the claim says when
// something will be.
func (w *Worker) claim(ctx context.Context, endpointID uuid.UUID, after Position, now time.Time, known *knownTarget) (Target, claimPlan, Claim, error) {
	if known.stale(now) {
		target, err := w.db.ReadTarget(ctx, endpointID)
		if err != nil {
			return known.target, claimPlan{}, Claim{}, err
		}
		*known = knownTarget{target: target, at: now}
	}
	if known.unlocked(now) {
		n := known.target.MaxInFlight
		claimed, err := w.claimer.claimUnlocked(ctx, ClaimRequest{EndpointID: endpointID, N: n, After: after})
		if err != nil {
			return known.target, claimPlan{}, Claim{}, fmt.Errorf("unlocked claim: %w", err)
		}
		return known.target, claimPlan{n: n}, claimed, nil
	}
	target, plan, claimed, err := w.claimLocked(ctx, endpointID, after, now)
	if err == nil {
		*known = knownTarget{target: target, at: now}
	}
	return target, plan, claimed, err
}

// claimLocked locks the endpoint, plans the claim from its rate limit,
// throttle and circuit, claims up to that many due deliveries (oldest due
// first; for a FIFO endpoint the heads of its lines, from the front,
// whatever after says) and saves the flow state the claim leaves. The
// target returned holds that flow state.
func (w *Worker) claimLocked(ctx context.Context, endpointID uuid.UUID, after Position, now time.Time) (Target, claimPlan, Claim, error) {
	tx, err := w.db.Begin(ctx)
	if err != nil {
		return Target{}, claimPlan{}, Claim{}, fmt.Errorf("begin claim: %w", err)
	}
	defer tx.Rollback(ctx)
	target, err := tx.LockEndpoint(ctx, endpointID)
	if err != nil {
		return target, claimPlan{}, Claim{}, fmt.Errorf("lock endpoint: %w", err)
	}
	plan := planClaim(target, now)
	var claimed Claim
	switch {
	case plan.n > 0 && target.FIFO:
		if claimed, err = tx.ClaimFIFO(ctx, endpointID, plan.n, now); err != nil {
			return target, plan, Claim{}, fmt.Errorf("claim line heads: %w", err)
		}
	case plan.n > 0:
		if claimed, err = tx.ClaimDue(ctx, ClaimRequest{EndpointID: endpointID, N: plan.n, After: after}); err != nil {
			return target, plan, Claim{}, fmt.Errorf("claim due: %w", err)
		}
	}
	flow := plan.claimed(target.RateLimit, len(claimed.Deliveries))
	if err := tx.SaveFlow(ctx, endpointID, target.Flow, flow); err != nil {
		return target, plan, Claim{}, fmt.Errorf("save flow: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return target, plan, Claim{}, fmt.Errorf("commit claim: %w", err)
	}
	target.Flow = flow
	return target, plan, claimed, nil
}

// record stores a batch's attempts: with the other runs' through the
// recorder when they change nothing in the endpoint's flow state as the
// run last read it (the common case of a healthy endpoint), else with
// recordLocked. It reports whether the flow state changed. With
// background, the recorder's commit goes on while the run does (pending,
// pendingRecord); recordLocked waits for those under way first.
//
// Attempts that were made are recorded even when the run is being cut short
// (shutdown, job timeout): the receiver has them, and forgetting them would
// only send them again.
func (w *Worker) record(ctx context.Context, target Target, sent []sentDelivery, queue *Nudger, pending *pendingRecord, background bool) (bool, error) {
	if len(sent) == 0 {
		if err := ctx.Err(); err != nil { // every send was cut short: nothing happened
			return false, fmt.Errorf("record: %w", err)
		}
		return false, nil
	}
	if !w.flow.changes(target.Flow, target.RateLimit, sent, w.cfg.Clock.Now()) && !needsOpEvent(sent) {
		out := outcomes(sent)
		if !background {
			return false, w.recordUnlocked(ctx, out)
		}
		return false, pending.start(func() error { return w.recordUnlocked(ctx, out) })
	}
	if err := pending.wait(); err != nil {
		return false, err
	}
	ctx, cancel := recordContext(ctx, w.cfg.Clock, recordTimeout)
	defer cancel()
	changes, before, after, err := w.recordLocked(ctx, target, sent, queue)
	if err != nil {
		return true, fmt.Errorf("locked record: %w", err)
	}
	w.observeBatch(target, changes, before, after, sent)
	return true, nil
}

// recordUnlocked stores outcomes through the recorder, within
// recordTimeout even when the run is being cut short.
func (w *Worker) recordUnlocked(ctx context.Context, out []Outcome) error {
	ctx, cancel := recordContext(ctx, w.cfg.Clock, recordTimeout)
	defer cancel()
	if err := w.recorder.record(ctx, out); err != nil {
		return fmt.Errorf("unlocked record: %w", err)
	}
	return nil
}

// recordTimeout bounds the recording of a batch whose run is being cut short.
const recordTimeout = 5 * time.Second

// recordContext lives as long as ctx and then grace longer: recording
// waits as long as the run may (a wide drain queues runs of hundreds of
// attempts behind one another in the recorder, seconds under load), and
// a run cut short still gets grace to record what it sent. A fixed
// deadline would fail a run whose record waits behind others, leaving its
// attempts unrecorded for the run's retry to send again.
func recordContext(ctx context.Context, clock Clock, grace time.Duration) (context.Context, context.CancelFunc) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		late, stop := clock.After(grace)
		defer stop()
		select {
		case <-late:
			cancel()
		case <-rctx.Done():
		}
	})
	return rctx, func() { stop(); cancel() }
}

// recordLocked locks the endpoint, applies the batch to the flow state it
// reads there, saves that, stores the attempts, the circuit transitions
// (queueing their emails), the endpoint's disabling when the batch calls
// for it, and the operational events that report all of these, in one
// transaction. It returns what it applied, for observeBatch once it has
// committed.
func (w *Worker) recordLocked(ctx context.Context, target Target, sent []sentDelivery, queue *Nudger) (changes []CircuitChange, before, after Flow, err error) {
	tx, err := w.db.Begin(ctx)
	if err != nil {
		return nil, before, after, fmt.Errorf("begin record: %w", err)
	}
	defer tx.Rollback(ctx)
	locked, err := tx.LockFlow(ctx, target.ID)
	if err != nil {
		return nil, before, after, fmt.Errorf("lock endpoint: %w", err)
	}
	before = locked.Flow
	now := w.cfg.Clock.Now()
	after, changes = w.flow.apply(before, target.RateLimit, sent, now)
	if err := tx.SaveFlow(ctx, target.ID, before, after); err != nil {
		return nil, before, after, fmt.Errorf("save flow: %w", err)
	}
	if err := tx.RecordOutcomes(ctx, outcomes(sent)); err != nil {
		return nil, before, after, fmt.Errorf("record outcomes: %w", err)
	}
	evs := opEvents(locked.Endpoint, changes, sent)
	if reason, lastError := w.flow.disable(after, sent, now); reason != "" && !locked.Disabled {
		disabled, err := tx.Disable(ctx, target.ID, reason)
		if err != nil {
			return nil, before, after, fmt.Errorf("disable: %w", err)
		}
		if disabled {
			ev := locked.Endpoint.Event(sluice.OpEndpointDisabled, reason)
			ev.Payload.LastError = lastError
			evs = append(evs, ev)
			w.cfg.Logger.Warn("endpoint disabled", "endpoint_id", target.ID, "reason", reason, "last_error", lastError)
		}
	}
	if err := tx.PostOpEvents(ctx, queue, now, locked.TenantID, evs); err != nil {
		return nil, before, after, fmt.Errorf("post operational events: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, before, after, fmt.Errorf("commit record: %w", err)
	}
	return changes, before, after, nil
}

// opEvents are the operational events a recorded batch reports: its circuit
// transitions and its dead letters, but none about a delivery of Sluice's
// own events (no event about an event about an event).
func opEvents(ep sluice.OpEndpoint, changes []CircuitChange, sent []sentDelivery) []sluice.OpEvent {
	var evs []sluice.OpEvent
	for _, a := range changes {
		if !a.Opened {
			evs = append(evs, ep.Event(sluice.OpEndpointCircuitClosed, sluice.ReasonProbeSucceeded))
			continue
		}
		ev := ep.Event(sluice.OpEndpointCircuitOpened, sluice.ReasonFailures)
		ev.Payload.LastError, ev.Payload.Failures, ev.Payload.NextProbeAt = a.LastError, a.Failures, a.NextProbeAt
		evs = append(evs, ev)
	}
	for _, s := range sent {
		if s.outcome.Status != sluice.DeliveryDead || sluice.IsReservedType(s.eventType) {
			continue
		}
		ev := ep.Event(sluice.OpDeliveryDead, sluice.ReasonAttemptsSpent)
		o := s.outcome
		ev.Payload.LastError, ev.Payload.EventType, ev.Payload.Attempts = o.Error, s.eventType, s.attempts
		ev.Payload.DeliveryID, ev.Payload.EventID = new(o.DeliveryID), new(o.EventID)
		if o.StatusCode != 0 {
			ev.Payload.LastStatus = new(o.StatusCode)
		}
		evs = append(evs, ev)
	}
	return evs
}

// park ends a blocked run: one that has to wait for its endpoint's
// throttle or circuit to lift, or for its next token. With the endpoint
// row locked it checks that the endpoint is still blocked (a circuit may
// have been closed by hand meanwhile, a rate limit changed); if so it
// completes the job and queues its successor for when the block lifts,
// recording the successor's id so that closing the circuit by hand or
// changing the endpoint can unpark it, and sets the Nudger's alarm. It
// reports whether it parked.
func (w *Worker) park(ctx context.Context, job *river.Job[jobs.DispatchArgs], queue *Nudger) (bool, error) {
	endpointID := job.Args.EndpointID
	tx, err := w.db.BeginSync(ctx)
	if err != nil {
		return false, fmt.Errorf("begin park: %w", err)
	}
	defer tx.Rollback(ctx)
	locked, err := tx.LockFlow(ctx, endpointID)
	if err != nil {
		return false, fmt.Errorf("lock endpoint: %w", err)
	}
	now := w.cfg.Clock.Now()
	until := waitUntil(locked.Flow, locked.RateLimit, now)
	if !now.Before(until) {
		if err := tx.Commit(ctx); err != nil { // free to send: go on
			return false, fmt.Errorf("commit: %w", err)
		}
		return false, nil
	}
	jobID, err := w.successor(ctx, tx, job, queue, until)
	if err != nil {
		return false, err
	}
	if err := tx.SetParkedJob(ctx, endpointID, jobID); err != nil {
		return false, fmt.Errorf("set parked job: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("commit park: %w", err)
	}
	queue.parked(endpointID, until)
	return true, nil
}

// finish ends the run when nothing is due (finishIn) and reports whether
// it did.
func (w *Worker) finish(ctx context.Context, job *river.Job[jobs.DispatchArgs]) (bool, error) {
	tx, err := w.db.BeginSync(ctx)
	if err != nil {
		return false, fmt.Errorf("begin finish: %w", err)
	}
	defer tx.Rollback(ctx)
	finished, err := w.finishIn(ctx, tx, job)
	if err != nil {
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("commit finish: %w", err)
	}
	return finished, nil
}

// finishIn is finish's step in tx: with the endpoint row locked FOR UPDATE
// against fan-out (whose delivery inserts take KEY SHARE) it checks once
// more for due deliveries, and only if there are none completes the job,
// leaving on the endpoint when its first queued retry is due, for the
// sweeper to queue its next run then. It reports whether the job is
// complete; the caller commits either way. Whether the endpoint is FIFO
// (which deliveries count as due: StepTx.NextQueued) is read under the
// lock, not as the run last knew it.
func (w *Worker) finishIn(ctx context.Context, tx *StepTx, job *river.Job[jobs.DispatchArgs]) (bool, error) {
	endpointID := job.Args.EndpointID
	retryDue, fifo, err := tx.LockToFinish(ctx, endpointID)
	if err != nil {
		return false, fmt.Errorf("lock endpoint: %w", err)
	}
	next, due, err := tx.NextQueued(ctx, endpointID, fifo)
	if err != nil {
		return false, fmt.Errorf("final check: %w", err)
	}
	if due {
		return false, nil // something became due while we looked
	}
	if !sameTime(retryDue, next) {
		if err := tx.SetRetryDue(ctx, endpointID, next); err != nil {
			return false, fmt.Errorf("set retry due: %w", err)
		}
	}
	if err := jobs.Complete(ctx, tx.Tx(), job); err != nil {
		return false, fmt.Errorf("complete job: %w", err)
	}
	return true, nil
}

// sameTime reports whether a and b are both nil or the same instant.
func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// yield ends a run whose budget is spent, or whose worker is stopping, in
// one transaction: as finish does if nothing is due, and otherwise by
// completing the job and queueing a successor, due at once, behind other
// work. A run that sent its endpoint's last due delivery as its budget
// ran out (every run of a drain wider than the workers) ends there,
// without a successor that would only find nothing to send.
//
// It looks first without the lock: a run that still has work due (every
// run under steady load) yields without locking its endpoint FOR UPDATE,
// which would hold up every fan-out to the endpoint until the yield
// committed, and fan-outs' KEY SHARE locks would hold up the yield in
// turn. A yield needs no lock: the successor becomes live in the
// transaction that completes the job, so fan-out always finds one of the
// two live.
//
// fifo is whether the endpoint is FIFO as the run last read it: the look
// without the lock only decides whether to try finishing.
func (w *Worker) yield(ctx context.Context, job *river.Job[jobs.DispatchArgs], queue *Nudger, fifo bool) error {
	tx, err := w.db.BeginSync(ctx)
	if err != nil {
		return fmt.Errorf("begin yield: %w", err)
	}
	defer tx.Rollback(ctx)
	_, due, err := tx.NextQueued(ctx, job.Args.EndpointID, fifo)
	if err != nil {
		return fmt.Errorf("look for due deliveries: %w", err)
	}
	finished := false
	if !due {
		if finished, err = w.finishIn(ctx, tx, job); err != nil {
			return err
		}
	}
	if !finished {
		if _, err := w.successor(ctx, tx, job, queue, time.Time{}); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit yield: %w", err)
	}
	return nil
}

// successor completes the running job and queues the endpoint's next
// dispatch (for a later time, or at once for a zero time) in the step's
// transaction, returning the new job's id. Unlike a snooze, which River
// applies after Work returns, the new job is visible (and can be unparked)
// the moment the transaction commits.
func (w *Worker) successor(ctx context.Context, tx *StepTx, job *river.Job[jobs.DispatchArgs], queue *Nudger, at time.Time) (int64, error) {
	if err := jobs.Complete(ctx, tx.Tx(), job); err != nil {
		return 0, fmt.Errorf("complete job: %w", err)
	}
	id, err := queue.successor(ctx, tx.Tx(), job.Args, at)
	if err != nil {
		return 0, fmt.Errorf("queue successor: %w", err)
	}
	return id, nil
}

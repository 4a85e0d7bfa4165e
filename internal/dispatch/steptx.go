package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/notify"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// StepTx is the transaction of one step of a run (claim, record, park,
// finish, yield) or of closing a circuit by hand: typed statements, called
// in order between a Begin and Commit, with the decisions between them
// made by the caller.
type StepTx struct {
	st *store.Store // opens the endpoint's sealed secrets
	tx store.Tx
}

// beginStep begins a step with settings (DB.Begin, DB.BeginSync; none
// for a change by hand, rare enough to need no settings).
func beginStep(ctx context.Context, st *store.Store, settings [][2]string) (*StepTx, error) {
	tx, err := st.BeginStep(ctx, settings)
	if err != nil {
		return nil, fmt.Errorf("begin step: %w", err)
	}
	return &StepTx{st: st, tx: tx}, nil
}

// Tx is the transaction itself, for River: a job completing itself and
// queueing its successor in the step's transaction.
func (t *StepTx) Tx() pgx.Tx { return t.tx.Tx }

// Commit commits the step.
func (t *StepTx) Commit(ctx context.Context) error {
	if err := t.tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Rollback abandons the step unless it has committed; defer it after
// beginning.
func (t *StepTx) Rollback(ctx context.Context) { _ = t.tx.Rollback(ctx) }

// LockEndpoint locks the endpoint row for the step (FOR NO KEY UPDATE,
// which does not block fan-out's delivery inserts) and returns what a run
// needs to send to it, with its flow state. A deleted endpoint is
// sluice.ErrNotFound.
func (t *StepTx) LockEndpoint(ctx context.Context, endpointID uuid.UUID) (Target, error) {
	row, err := t.tx.Q.LockEndpointForDispatch(ctx, endpointID)
	if err != nil {
		return Target{}, fmt.Errorf("lock endpoint for dispatch: %w", store.NotFound(err))
	}
	return t.reader().target(ctx, row)
}

// LockedFlow is an endpoint's flow state as read under its row lock, with
// what the caller needs to act on it.
type LockedFlow struct {
	TenantID    uuid.UUID
	Endpoint    sluice.OpEndpoint // what an operational event about it names
	Disabled    bool
	RateLimit   *sluice.RateLimit
	ParkedJobID *int64 // its parked dispatch job, if one was recorded (SetParkedJob)
	Flow        Flow
}

// LockFlow locks the endpoint row as LockEndpoint does and returns only its
// flow state: for the steps that send nothing (record, park, closing a
// circuit), so nothing is decrypted.
func (t *StepTx) LockFlow(ctx context.Context, endpointID uuid.UUID) (LockedFlow, error) {
	row, err := t.tx.Q.LockEndpointForDispatch(ctx, endpointID)
	if err != nil {
		return LockedFlow{}, fmt.Errorf("lock endpoint for dispatch: %w", store.NotFound(err))
	}
	e := row.Endpoint
	return LockedFlow{
		TenantID:    e.TenantID,
		Endpoint:    sluice.OpEndpoint{ID: e.ID, URL: e.Url, Consumer: e.Consumer},
		Disabled:    e.Disabled,
		RateLimit:   store.EndpointRateLimit(e),
		ParkedJobID: e.ParkedJobID,
		Flow:        flowFromRow(row),
	}, nil
}

// ClaimDue claims up to c.N of the endpoint's due deliveries after c.After,
// oldest due first (ClaimDueDeliveries says why it locks nothing).
func (t *StepTx) ClaimDue(ctx context.Context, c ClaimRequest) (Claim, error) {
	claimed, err := claimDue(ctx, t.tx.Q, []ClaimRequest{c})
	if err != nil {
		return Claim{}, err
	}
	return claimed[0], nil
}

// SaveFlow writes what changed from before to after in the endpoint's flow
// state (its throttle row, its bucket and circuit columns); nothing when
// nothing changed.
func (t *StepTx) SaveFlow(ctx context.Context, endpointID uuid.UUID, before, after Flow) error {
	return saveFlow(ctx, t.tx.Q, endpointID, before, after)
}

// RecordOutcomes stores a batch of attempts and applies them to their
// deliveries, in one statement.
func (t *StepTx) RecordOutcomes(ctx context.Context, outcomes []Outcome) error {
	if err := t.tx.Q.RecordOutcomes(ctx, outcomeParams(outcomes)); err != nil {
		return fmt.Errorf("record outcomes: %w", err)
	}
	return nil
}

// CircuitChange is a circuit opening or closing, which a step reports as
// an operational event (and so an email to the endpoint's owner).
type CircuitChange struct {
	Opened      bool
	LastError   string
	Failures    int
	NextProbeAt *time.Time
}

// Disable disables the endpoint for reason (sluice.DisabledGone or
// DisabledFailing). It reports false, doing nothing, for an endpoint
// disabled already; the caller posts sluice.endpoint.disabled, which emails
// the owner.
func (t *StepTx) Disable(ctx context.Context, endpointID uuid.UUID, reason string) (bool, error) {
	n, err := t.tx.Q.DisableEndpoint(ctx, dbq.DisableEndpointParams{ID: endpointID, Reason: &reason})
	if err != nil {
		return false, fmt.Errorf("disable endpoint: %w", err)
	}
	return n > 0, nil
}

// PostOpEvents posts operational events, created at at, into the tenant's
// stream in the step's transaction (notify.PostOpEvents), so each commits
// with the transition it reports.
func (t *StepTx) PostOpEvents(ctx context.Context, nudger notify.Nudger, at time.Time, tenantID uuid.UUID, evs []sluice.OpEvent) error {
	return notify.PostOpEvents(ctx, t.tx, nudger, at, tenantID, evs) //nolint:wrapcheck // notify says what failed
}

// SetParkedJob records the endpoint's parked dispatch job, so that closing
// its circuit by hand or changing the endpoint can unpark it.
func (t *StepTx) SetParkedJob(ctx context.Context, endpointID uuid.UUID, jobID int64) error {
	if err := t.tx.Q.SetParkedJob(ctx, dbq.SetParkedJobParams{ID: endpointID, JobID: &jobID}); err != nil {
		return fmt.Errorf("set parked job: %w", err)
	}
	return nil
}

// LockToFinish locks the endpoint row FOR UPDATE, against fan-out (whose
// delivery inserts take KEY SHARE), before a run decides it is done: see
// 00002_events.sql. It returns when the endpoint's next retry is due as
// last written (SetRetryDue), and whether the endpoint is FIFO. A deleted
// endpoint is no error.
func (t *StepTx) LockToFinish(ctx context.Context, endpointID uuid.UUID) (retryDue *time.Time, fifo bool, err error) {
	row, err := t.tx.Q.LockEndpointToFinish(ctx, endpointID)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, false, fmt.Errorf("lock endpoint to finish: %w", err)
	}
	return row.RetryDueAt, row.Fifo, nil
}

// NextQueued reports when the endpoint's first queued delivery is due (nil:
// none is queued) and whether it is due already, by the clock at the time
// it runs (NextQueuedDelivery says why); for a FIFO endpoint, only the
// heads of its lines count (NextQueuedFIFO).
func (t *StepTx) NextQueued(ctx context.Context, endpointID uuid.UUID, fifo bool) (next *time.Time, due bool, err error) {
	if fifo {
		return t.NextQueuedFIFO(ctx, endpointID)
	}
	row, err := t.tx.Q.NextQueuedDelivery(ctx, endpointID)
	if err != nil {
		return nil, false, fmt.Errorf("next queued delivery: %w", err)
	}
	return row.NextAttemptAt, row.Due, nil
}

// SetRetryDue writes when the endpoint's next retry is due (nil: none), for
// the sweeper to nudge its endpoint then (the sweeper, package maintenance).
func (t *StepTx) SetRetryDue(ctx context.Context, endpointID uuid.UUID, at *time.Time) error {
	if err := t.tx.Q.SetRetryDue(ctx, dbq.SetRetryDueParams{ID: endpointID, RetryDueAt: at}); err != nil {
		return fmt.Errorf("set retry due: %w", err)
	}
	return nil
}

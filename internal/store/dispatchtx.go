package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// DispatchTx is the transaction of one dispatch step (claim, record, park,
// finish, yield) or of closing a circuit by hand: typed statements, called
// in order between a Begin and Commit. The decisions between them are
// package dispatch's; the store only reads and writes.
type DispatchTx struct {
	s  *Store
	tx pgx.Tx
	q  *dbq.Queries
}

// asyncCommit begins a transaction whose commit does not wait for the WAL
// flush: see inAsyncTx. One round trip: BEGIN and the setting go as one
// simple-protocol query.
const asyncCommit = "BEGIN; SET LOCAL synchronous_commit = off"

// dispatchStep begins a claim or a record with recordSettings, since
// RecordOutcomes runs here too: an asynchronous commit (see inAsyncTx),
// the generic plan, and the planner held to nested loops over index
// probes. Every statement of these steps looks rows up by key, so the plan
// made once per connection is the one each call's values would get, and
// planning for each call cost more than running
// (TestDispatchStepsPlanOncePerConnection). One round trip: BEGIN and the
// settings go as one simple-protocol query.
var dispatchStep = "BEGIN" + setLocal(recordSettings)

// BeginDispatch begins a claim or a record: a transaction whose loss in a
// Postgres crash only means a delivery is sent again (see inAsyncTx), so
// its commit does not wait for the WAL flush.
func (s *Store) BeginDispatch(ctx context.Context) (*DispatchTx, error) {
	return s.beginDispatch(ctx, pgx.TxOptions{BeginQuery: dispatchStep})
}

// dispatchSyncStep begins a step that changes River's jobs: synchronously
// committed, with the settings of dispatchStep otherwise, since River's
// job completion in it (JobSetStateIfRunningMany) was otherwise planned
// for its values on every call.
var dispatchSyncStep = "BEGIN" + setLocal(keyLookups)

// BeginDispatchSync begins a step that changes River's jobs (park, finish,
// yield): synchronously committed.
func (s *Store) BeginDispatchSync(ctx context.Context) (*DispatchTx, error) {
	return s.beginDispatch(ctx, pgx.TxOptions{BeginQuery: dispatchSyncStep})
}

// BeginByHand begins a change an operator makes by hand (closing a
// circuit): an ordinary transaction, rare enough to need no settings.
func (s *Store) BeginByHand(ctx context.Context) (*DispatchTx, error) {
	return s.beginDispatch(ctx, pgx.TxOptions{})
}

func (s *Store) beginDispatch(ctx context.Context, opts pgx.TxOptions) (*DispatchTx, error) {
	tx, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	return &DispatchTx{s: s, tx: tx, q: s.q.WithTx(tx)}, nil
}

// Tx is the transaction itself, for River: a job completing itself and
// queueing its successor in the step's transaction.
func (t *DispatchTx) Tx() pgx.Tx { return t.tx }

// Commit commits the step.
func (t *DispatchTx) Commit(ctx context.Context) error {
	if err := t.tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Rollback abandons the step unless it has committed; defer it after
// beginning.
func (t *DispatchTx) Rollback(ctx context.Context) { _ = t.tx.Rollback(ctx) }

// LockEndpoint locks the endpoint row for the step (FOR NO KEY UPDATE,
// which does not block fan-out's delivery inserts) and returns what a
// dispatcher needs to send to it, with its flow state. A deleted endpoint
// is sluice.ErrNotFound.
func (t *DispatchTx) LockEndpoint(ctx context.Context, endpointID uuid.UUID) (Target, error) {
	row, err := t.q.LockEndpointForDispatch(ctx, endpointID)
	if err != nil {
		return Target{}, notFound(err)
	}
	return t.s.target(row)
}

// LockedFlow is an endpoint's flow state as read under its row lock, with
// what the caller needs to act on it.
type LockedFlow struct {
	TenantID    uuid.UUID
	RateLimit   *sluice.RateLimit
	ParkedJobID *int64 // its parked dispatch job, if one was recorded (SetParkedJob)
	Flow        Flow
}

// LockFlow locks the endpoint row as LockEndpoint does and returns only its
// flow state: for the steps that send nothing (record, park, closing a
// circuit), so nothing is decrypted.
func (t *DispatchTx) LockFlow(ctx context.Context, endpointID uuid.UUID) (LockedFlow, error) {
	row, err := t.q.LockEndpointForDispatch(ctx, endpointID)
	if err != nil {
		return LockedFlow{}, notFound(err)
	}
	e := row.Endpoint
	return LockedFlow{
		TenantID:    e.TenantID,
		RateLimit:   rateLimitFromColumns(e.RateLimitPerSecond, e.RateLimitPerMinute, e.RateLimitBurst),
		ParkedJobID: e.ParkedJobID,
		Flow:        flowFromRow(row),
	}, nil
}

// ClaimDue claims up to c.N of the endpoint's due deliveries after c.After,
// oldest due first (ClaimDueDeliveries says why it locks nothing).
func (t *DispatchTx) ClaimDue(ctx context.Context, c ClaimRequest) (Claim, error) {
	claimed, err := claimDue(ctx, t.q, []ClaimRequest{c})
	if err != nil {
		return Claim{}, err
	}
	return claimed[0], nil
}

// SaveFlow writes what changed from before to after in the endpoint's flow
// state (its throttle row, its bucket and circuit columns); nothing when
// nothing changed.
func (t *DispatchTx) SaveFlow(ctx context.Context, endpointID uuid.UUID, before, after Flow) error {
	return saveFlow(ctx, t.q, endpointID, before, after)
}

// RecordOutcomes stores a batch of attempts and applies them to their
// deliveries, in one statement.
func (t *DispatchTx) RecordOutcomes(ctx context.Context, outcomes []Outcome) error {
	if err := t.q.RecordOutcomes(ctx, outcomeParams(outcomes)); err != nil {
		return fmt.Errorf("record outcomes: %w", err)
	}
	return nil
}

// InsertAlerts stores circuit transitions and queues their emails, so a
// transition is announced exactly when it is committed.
func (t *DispatchTx) InsertAlerts(ctx context.Context, tenantID, endpointID uuid.UUID, alerts []Alert, jobs JobQueue) error {
	for _, a := range alerts {
		id := newID()
		err := t.q.InsertCircuitAlert(ctx, dbq.InsertCircuitAlertParams{
			ID: id, TenantID: tenantID, EndpointID: endpointID, Opened: a.Opened,
			LastError: a.LastError, Failures: int32(a.Failures), NextProbeAt: a.NextProbeAt,
		})
		if err != nil {
			return fmt.Errorf("insert circuit alert: %w", err)
		}
		if err := jobs.Alert(ctx, t.tx, id); err != nil {
			return fmt.Errorf("queue circuit alert: %w", err)
		}
	}
	return nil
}

// SetParkedJob records the endpoint's parked dispatch job, so that closing
// its circuit by hand or changing the endpoint can unpark it.
func (t *DispatchTx) SetParkedJob(ctx context.Context, endpointID uuid.UUID, jobID int64) error {
	if err := t.q.SetParkedJob(ctx, dbq.SetParkedJobParams{ID: endpointID, JobID: &jobID}); err != nil {
		return fmt.Errorf("set parked job: %w", err)
	}
	return nil
}

// LockToFinish locks the endpoint row FOR UPDATE, against fan-out (whose
// delivery inserts take KEY SHARE), before a dispatch run decides it is
// done: see 00002_events.sql. It returns when the endpoint's next retry is
// due as last written (SetRetryDue). A deleted endpoint is no error.
func (t *DispatchTx) LockToFinish(ctx context.Context, endpointID uuid.UUID) (retryDue *time.Time, err error) {
	row, err := t.q.LockEndpointToFinish(ctx, endpointID)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("lock endpoint to finish: %w", err)
	}
	return row.RetryDueAt, nil
}

// NextQueued reports when the endpoint's first queued delivery is due (nil:
// none is queued) and whether it is due already, by the clock at the time
// it runs (NextQueuedDelivery says why).
func (t *DispatchTx) NextQueued(ctx context.Context, endpointID uuid.UUID) (next *time.Time, due bool, err error) {
	row, err := t.q.NextQueuedDelivery(ctx, endpointID)
	if err != nil {
		return nil, false, fmt.Errorf("next queued delivery: %w", err)
	}
	return row.NextAttemptAt, row.Due, nil
}

// SetRetryDue writes when the endpoint's next retry is due (nil: none), for
// the sweeper to nudge its endpoint then (Store.TakeRetriesDue).
func (t *DispatchTx) SetRetryDue(ctx context.Context, endpointID uuid.UUID, at *time.Time) error {
	if err := t.q.SetRetryDue(ctx, dbq.SetRetryDueParams{ID: endpointID, RetryDueAt: at}); err != nil {
		return fmt.Errorf("set retry due: %w", err)
	}
	return nil
}

package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/signature"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Target is what a dispatcher needs to send to one endpoint: where, how
// signed, how fast, and its flow-control state.
type Target struct {
	ID          uuid.UUID
	TenantID    uuid.UUID
	URL         string
	Headers     map[string]string
	Keys        [][]byte // signing keys: the current secret's, then a rotated-out one still in its grace period
	MaxInFlight int
	RateLimit   *sluice.RateLimit
	Disabled    bool
	Flow        Flow
}

// Claimed is a due delivery handed to a dispatcher, with its event.
type Claimed struct {
	ID             uuid.UUID
	EventID        uuid.UUID
	FailureCount   int
	AttemptCount   int       // attempts so far, 429s included
	Replayed       bool      // a replay of an earlier delivery
	NextAttemptAt  time.Time // when it came due
	EventType      string
	Payload        []byte
	EventCreatedAt time.Time
}

// Outcome is what one attempt did to its delivery.
type Outcome struct {
	DeliveryID    uuid.UUID
	EventID       uuid.UUID // the event that was sent
	Status        string
	Failed        bool // the attempt spends retry budget
	NextAttemptAt time.Time
	Attempt       sluice.Attempt
}

// Planner decides, inside the claim transaction, how many deliveries an
// endpoint may be sent now. It may change t.Flow (refilling the bucket,
// moving the circuit to half-open); the store saves what it changes.
type Planner interface {
	// Plan returns how many deliveries may be claimed.
	Plan(t *Target) int
	// Claimed accounts for the n deliveries actually claimed.
	Claimed(t *Target, n int)
}

// Alert is a circuit transition to email the tenant about.
type Alert struct {
	Opened      bool
	LastError   string
	Failures    int
	NextProbeAt *time.Time
}

// Claim locks an endpoint, asks plan how many deliveries may go now, claims
// up to that many due ones (oldest due first) and saves the flow state.
func (s *Store) Claim(ctx context.Context, endpointID uuid.UUID, plan Planner) (Target, []Claimed, error) {
	var (
		target  Target
		claimed []Claimed
	)
	err := s.inAsyncTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		row, err := q.LockEndpointForDispatch(ctx, endpointID)
		if err != nil {
			return notFound(err)
		}
		if target, err = s.target(row); err != nil {
			return err
		}
		before := target.Flow
		if n := plan.Plan(&target); n > 0 {
			rows, err := q.ClaimDueDeliveries(ctx, dbq.ClaimDueDeliveriesParams{EndpointID: endpointID, MaxRows: int32(n)})
			if err != nil {
				return err
			}
			claimed = claimedFromRows(rows)
		}
		plan.Claimed(&target, len(claimed))
		if target.Flow == before {
			return nil
		}
		return q.SaveFlow(ctx, saveFlowParams(endpointID, target.Flow))
	})
	return target, claimed, err
}

// ClaimPlain claims up to n of an endpoint's due deliveries without
// touching the endpoint row: for a dispatcher that knows (from a Claim less
// than a second ago) that the endpoint has no rate limit, no throttle and a
// healthy circuit, so there is nothing to decide or save. It is one read,
// outside any transaction (ClaimDueDeliveries says why nothing is locked).
func (s *Store) ClaimPlain(ctx context.Context, endpointID uuid.UUID, n int) ([]Claimed, error) {
	rows, err := s.q.ClaimDueDeliveries(ctx, dbq.ClaimDueDeliveriesParams{EndpointID: endpointID, MaxRows: int32(n)})
	return claimedFromRows(rows), err
}

func claimedFromRows(rows []dbq.ClaimDueDeliveriesRow) []Claimed {
	out := make([]Claimed, len(rows))
	for i, r := range rows {
		out[i] = Claimed{
			ID: r.ID, EventID: r.EventID, FailureCount: int(r.FailureCount), NextAttemptAt: *r.NextAttemptAt,
			AttemptCount: int(r.AttemptCount), Replayed: r.Replayed,
			EventType: r.Type, Payload: r.Payload, EventCreatedAt: r.EventCreatedAt,
		}
	}
	return out
}

func (s *Store) target(row dbq.LockEndpointForDispatchRow) (Target, error) {
	r := row.Endpoint
	t := Target{
		ID:          r.ID,
		TenantID:    r.TenantID,
		URL:         r.Url,
		MaxInFlight: int(r.MaxInFlight),
		RateLimit:   rateLimitFromColumns(r.RateLimitPerSecond, r.RateLimitPerMinute, r.RateLimitBurst),
		Disabled:    r.Disabled,
		Flow:        flowFromRow(row),
	}
	if err := json.Unmarshal(r.Headers, &t.Headers); err != nil {
		return t, err
	}
	secrets := [][]byte{r.SecretEnc}
	if r.PreviousSecretEnc != nil && r.PreviousSecretExpiresAt != nil && time.Now().Before(*r.PreviousSecretExpiresAt) {
		secrets = append(secrets, r.PreviousSecretEnc)
	}
	for _, sealed := range secrets {
		secret, err := s.box.Open(sealed)
		if err != nil {
			return t, err
		}
		key, err := signature.Key(string(secret))
		if err != nil {
			return t, err
		}
		t.Keys = append(t.Keys, key)
	}
	return t, nil
}

// Record stores a batch of attempts and their effect on their deliveries,
// and lets apply update the endpoint's flow state from them (circuit,
// throttle) with the endpoint row locked, all in one transaction. The
// alerts apply returns are stored and their emails queued in the same
// transaction, so a transition is announced exactly when it is committed.
// Batches that cannot change flow state go through RecordPlain instead.
func (s *Store) Record(ctx context.Context, endpointID uuid.UUID, outcomes []Outcome, jobs JobQueue, apply func(*Flow) []Alert) error {
	return s.inAsyncTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		row, err := q.LockEndpointForDispatch(ctx, endpointID)
		if err != nil {
			return notFound(err)
		}
		flow := flowFromRow(row)
		before := flow
		alerts := apply(&flow)
		if err := s.saveFlow(ctx, q, endpointID, before, flow); err != nil {
			return err
		}
		if err := q.RecordOutcomes(ctx, outcomeParams(outcomes)); err != nil {
			return err
		}
		return s.insertAlerts(ctx, tx, row.Endpoint, alerts, jobs)
	})
}

// RecordPlain stores attempts that change no endpoint's flow state, of any
// endpoints, in one statement.
func (s *Store) RecordPlain(ctx context.Context, outcomes []Outcome) error {
	return s.inAsyncTx(ctx, func(tx pgx.Tx) error {
		return s.q.WithTx(tx).RecordOutcomes(ctx, outcomeParams(outcomes))
	})
}

func (s *Store) saveFlow(ctx context.Context, q *dbq.Queries, endpointID uuid.UUID, before, after Flow) error {
	if after.Throttle != before.Throttle {
		var err error
		if after.Throttle.Count == 0 {
			err = q.DeleteThrottle(ctx, endpointID)
		} else {
			err = q.UpsertThrottle(ctx, dbq.UpsertThrottleParams{
				EndpointID: endpointID, ThrottledUntil: after.Throttle.Until,
				Reason: after.Throttle.Reason, Consecutive429s: int32(after.Throttle.Count),
			})
		}
		if err != nil {
			return err
		}
	}
	if after.Bucket == before.Bucket && after.Breaker == before.Breaker {
		return nil
	}
	return q.SaveFlow(ctx, saveFlowParams(endpointID, after))
}

func (s *Store) insertAlerts(ctx context.Context, tx pgx.Tx, ep dbq.Endpoint, alerts []Alert, jobs JobQueue) error {
	q := s.q.WithTx(tx)
	for _, a := range alerts {
		id := newID()
		err := q.InsertCircuitAlert(ctx, dbq.InsertCircuitAlertParams{
			ID: id, TenantID: ep.TenantID, EndpointID: ep.ID, Opened: a.Opened,
			LastError: a.LastError, Failures: int32(a.Failures), NextProbeAt: a.NextProbeAt,
		})
		if err != nil {
			return err
		}
		if err := jobs.Alert(ctx, tx, id); err != nil {
			return err
		}
	}
	return nil
}

// outcomeParams lays a batch of outcomes out as RecordOutcomes' arrays.
func outcomeParams(outcomes []Outcome) dbq.RecordOutcomesParams {
	n := len(outcomes)
	p := dbq.RecordOutcomesParams{
		Ids: make([]uuid.UUID, n), EventIds: make([]uuid.UUID, n), Statuses: make([]string, n),
		Failed: make([]int32, n), NextAttemptAts: make([]time.Time, n),
		Ats: make([]time.Time, n), StatusCodes: make([]int32, n), Errors: make([]string, n),
		LatenciesMs: make([]int32, n), Bodies: make([]string, n),
	}
	for i, o := range outcomes {
		p.Ids[i], p.EventIds[i], p.Statuses[i], p.NextAttemptAts[i] = o.DeliveryID, o.EventID, o.Status, o.NextAttemptAt
		if o.Failed {
			p.Failed[i] = 1
		}
		a := o.Attempt
		p.Ats[i], p.LatenciesMs[i] = a.At, int32(a.LatencyMS)
		if a.StatusCode != nil {
			p.StatusCodes[i] = int32(*a.StatusCode)
		}
		if a.Error != nil {
			p.Errors[i] = *a.Error
		}
		if a.ResponseBody != nil {
			p.Bodies[i] = *a.ResponseBody
		}
	}
	return p
}

// Park ends a dispatch run that has to wait for an endpoint's throttle or
// circuit to lift, or for its next token. With the endpoint row locked it
// asks blockedUntil whether the endpoint still has to wait (a circuit may
// have been closed by hand meanwhile, a rate limit changed); if so,
// successor completes the running job and queues the next one for that
// time, returning its id, which is recorded so that closing the circuit by
// hand or changing the endpoint can wake it. Park reports whether it parked.
func (s *Store) Park(ctx context.Context, endpointID uuid.UUID, blockedUntil func(Flow, *sluice.RateLimit) time.Time,
	successor func(ctx context.Context, tx pgx.Tx, at time.Time) (int64, error)) (bool, error) {
	parked := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		row, err := q.LockEndpointForDispatch(ctx, endpointID)
		if err != nil {
			return notFound(err)
		}
		e := row.Endpoint
		until := blockedUntil(flowFromRow(row), rateLimitFromColumns(e.RateLimitPerSecond, e.RateLimitPerMinute, e.RateLimitBurst))
		if !time.Now().Before(until) {
			return nil
		}
		jobID, err := successor(ctx, tx, until)
		if err != nil {
			return err
		}
		parked = true
		return q.SetParkedJob(ctx, dbq.SetParkedJobParams{ID: endpointID, JobID: &jobID})
	})
	return parked, err
}

// FinishDispatch ends an endpoint's dispatch when nothing is due: with the
// endpoint row locked against fan-out it checks once more for due
// deliveries, and only if there are none runs done (the job completing
// itself) and commits. It reports whether the dispatch finished.
func (s *Store) FinishDispatch(ctx context.Context, endpointID uuid.UUID, done TxHook) (bool, error) {
	finished := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if _, err := q.LockEndpointToFinish(ctx, endpointID); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		due, err := q.HasDueDeliveries(ctx, endpointID)
		if err != nil || due {
			return err
		}
		finished = true
		return done(ctx, tx)
	})
	return finished, err
}

// NextDueAt is when the endpoint's earliest queued delivery is due, nil when
// its queue is empty.
func (s *Store) NextDueAt(ctx context.Context, endpointID uuid.UUID) (*time.Time, error) {
	t, err := s.q.NextDueAt(ctx, endpointID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return t, err
}

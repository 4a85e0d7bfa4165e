package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

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

// Claimed is a due delivery a dispatch run claimed, with its event.
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

// Position is a delivery's place in its endpoint's queue, which claims read
// oldest due first: by next attempt time, then by id. The zero Position is
// before every delivery.
type Position struct {
	NextAttemptAt time.Time
	ID            uuid.UUID
}

// Position is the claimed delivery's place in its endpoint's queue.
func (c Claimed) Position() Position {
	return Position{NextAttemptAt: c.NextAttemptAt, ID: c.ID}
}

// Outcome is one attempt and what it did to its delivery: a row of
// delivery_attempts and the delivery's new state.
type Outcome struct {
	DeliveryID    uuid.UUID
	EventID       uuid.UUID // the event that was sent
	Status        string
	Failed        bool // the attempt spends retry budget
	NextAttemptAt time.Time

	At           time.Time // when the attempt started
	StatusCode   int       // 0 when no response arrived
	Error        string    // "" when none
	LatencyMS    int
	ResponseBody string // "" when none
}

// Alert is a circuit transition to email the tenant about.
type Alert struct {
	Opened      bool
	LastError   string
	Failures    int
	NextProbeAt *time.Time
}

// ClaimPlain claims up to n of an endpoint's due deliveries without
// touching the endpoint row: for a dispatcher that knows (from a Claim less
// than a second ago) that the endpoint has no rate limit, no throttle and a
// healthy circuit, so there is nothing to decide or save. It is one read,
// outside any transaction (ClaimDueDeliveries says why nothing is locked).
func (s *Store) ClaimPlain(ctx context.Context, endpointID uuid.UUID, n int) ([]Claimed, error) {
	claimed, err := s.ClaimPlainMany(ctx, []ClaimRequest{{EndpointID: endpointID, N: n}})
	if err != nil {
		return nil, err
	}
	return claimed[0].Deliveries, nil
}

// Claim is what a claim found for one endpoint.
type Claim struct {
	// Deliveries are the due deliveries claimed, oldest due first.
	Deliveries []Claimed
	// NextDue is, when none was due, when the endpoint's earliest queued
	// delivery is; nil when it has none queued.
	NextDue *time.Time
}

// ClaimRequest asks for up to N of an endpoint's due deliveries after a
// position in its queue (ClaimDueDeliveries says why).
type ClaimRequest struct {
	EndpointID uuid.UUID
	N          int
	After      Position
}

// ClaimPlainMany is ClaimPlain for many endpoints in one statement: the
// plain claims of concurrent dispatch runs, group-committed. It returns
// what each claim found, in the order of claims.
func (s *Store) ClaimPlainMany(ctx context.Context, claims []ClaimRequest) ([]Claim, error) {
	return claimDue(ctx, s.groupClaim, claims)
}

// claimDue runs ClaimDueDeliveries for claims, on a pool or in a
// transaction, and sorts its rows out by claim.
func claimDue(ctx context.Context, q *dbq.Queries, claims []ClaimRequest) ([]Claim, error) {
	p := dbq.ClaimDueDeliveriesParams{
		EndpointIds: make([]uuid.UUID, len(claims)), MaxRows: make([]int32, len(claims)),
		AfterAts: make([]time.Time, len(claims)), AfterIds: make([]uuid.UUID, len(claims)),
	}
	for i, c := range claims {
		p.EndpointIds[i], p.MaxRows[i] = c.EndpointID, int32(c.N)
		p.AfterAts[i], p.AfterIds[i] = c.After.NextAttemptAt, c.After.ID
	}
	rows, err := q.ClaimDueDeliveries(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("claim due deliveries: %w", err)
	}
	byEndpoint := make(map[uuid.UUID]*Claim, len(claims))
	for _, r := range rows {
		c := byEndpoint[r.EndpointID]
		if c == nil {
			c = &Claim{}
			byEndpoint[r.EndpointID] = c
		}
		if !r.Claimed {
			c.NextDue = r.NextAttemptAt
			continue
		}
		c.Deliveries = append(c.Deliveries, Claimed{
			ID: r.ID, EventID: r.EventID, FailureCount: int(r.FailureCount), NextAttemptAt: *r.NextAttemptAt,
			AttemptCount: int(r.AttemptCount), Replayed: r.Replayed,
			EventType: r.Type, Payload: r.Payload, EventCreatedAt: r.EventCreatedAt,
		})
	}
	out := make([]Claim, len(claims))
	for i, c := range claims {
		if got := byEndpoint[c.EndpointID]; got != nil {
			out[i] = *got
		}
		slices.SortFunc(out[i].Deliveries, func(a, b Claimed) int {
			return cmp.Or(a.NextAttemptAt.Compare(b.NextAttemptAt), bytes.Compare(a.ID[:], b.ID[:]))
		})
	}
	return out, nil
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
		return t, fmt.Errorf("read endpoint headers: %w", err)
	}
	secrets := [][]byte{r.SecretEnc}
	if r.PreviousSecretEnc != nil && r.PreviousSecretExpiresAt != nil && time.Now().Before(*r.PreviousSecretExpiresAt) {
		secrets = append(secrets, r.PreviousSecretEnc)
	}
	for _, sealed := range secrets {
		secret, err := s.box.Open(sealed)
		if err != nil {
			return t, fmt.Errorf("open endpoint secret: %w", err)
		}
		key, err := signature.Key(string(secret))
		if err != nil {
			return t, fmt.Errorf("read endpoint secret: %w", err)
		}
		t.Keys = append(t.Keys, key)
	}
	return t, nil
}

// RecordPlain stores attempts that change no endpoint's flow state, of any
// endpoints, in one statement.
func (s *Store) RecordPlain(ctx context.Context, outcomes []Outcome) error {
	if err := s.plainRecord.RecordOutcomes(ctx, outcomeParams(outcomes)); err != nil {
		return fmt.Errorf("record outcomes: %w", err)
	}
	return nil
}

// saveFlow writes what changed from before to after in an endpoint's flow
// state.
func saveFlow(ctx context.Context, q *dbq.Queries, endpointID uuid.UUID, before, after Flow) error {
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
			return fmt.Errorf("save throttle: %w", err)
		}
	}
	if after.Bucket == before.Bucket && after.Breaker == before.Breaker {
		return nil
	}
	if err := q.SaveFlow(ctx, saveFlowParams(endpointID, after)); err != nil {
		return fmt.Errorf("save flow: %w", err)
	}
	return nil
}

// outcomeParams lays a batch of outcomes out as RecordOutcomes' arrays,
// in delivery id order: the ids follow their events' time, so Postgres
// updates the deliveries, and inserts their index entries, in the order
// they lie on disk rather than one run's batch after another's
// (TestRecordsGoInDeliveryOrder).
func outcomeParams(outcomes []Outcome) dbq.RecordOutcomesParams {
	outcomes = slices.SortedFunc(slices.Values(outcomes), func(a, b Outcome) int {
		return bytes.Compare(a.DeliveryID[:], b.DeliveryID[:])
	})
	n := len(outcomes)
	p := dbq.RecordOutcomesParams{
		Ids: make([]uuid.UUID, n), EventIds: make([]uuid.UUID, n), Statuses: make([]string, n),
		WeekLos: make([]uuid.UUID, n), WeekHis: make([]uuid.UUID, n),
		Failed: make([]int32, n), NextAttemptAts: make([]time.Time, n),
		Ats: make([]time.Time, n), StatusCodes: make([]int32, n), Errors: make([]string, n),
		LatenciesMs: make([]int32, n), Bodies: make([]string, n),
	}
	for i, o := range outcomes {
		p.Ids[i], p.EventIds[i], p.Statuses[i], p.NextAttemptAts[i] = o.DeliveryID, o.EventID, o.Status, o.NextAttemptAt
		p.WeekLos[i], p.WeekHis[i] = WeekBounds(o.EventID)
		if o.Failed {
			p.Failed[i] = 1
		}
		p.Ats[i], p.StatusCodes[i], p.Errors[i] = o.At, int32(o.StatusCode), o.Error
		p.LatenciesMs[i], p.Bodies[i] = int32(o.LatencyMS), o.ResponseBody
	}
	return p
}

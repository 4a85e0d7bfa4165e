package dispatch

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// DB is a dispatch run's reads and writes on the shared store: the
// transactions of its steps (StepTx) and the unlocked claims and records,
// which need none.
type DB struct {
	st *store.Store
	// groupClaim runs the group claim alone with keyLookups: its plan is
	// the same for any endpoints and limits (each week's claim index read
	// in order, TestClaimPlanDoesNotDependOnTheBacklog), and planning it
	// across the partitions on every call would cost more than running it.
	// It shares the routed insert's connections (the same settings).
	groupClaim *dbq.Queries
	// unlockedRecord runs the unlocked record alone with recordSettings.
	unlockedRecord *dbq.Queries
}

// NewDB returns the dispatch statements on st.
func NewDB(st *store.Store) *DB {
	return &DB{
		st:             st,
		groupClaim:     st.OneShot(keyLookups),
		unlockedRecord: st.OneShot(recordSettings),
	}
}

// keyLookups are the settings of the steps, whose statements all look
// rows up by key: the generic plan, made once per connection, held to
// nested loops over index probes, so that the plan made once is the one
// each call's values would get (TestDispatchStepsPlanOncePerConnection).
var keyLookups = append([][2]string{store.GenericPlan}, store.IndexProbes...)

// recordSettings are what RecordOutcomes runs with: keyLookups, so that
// each delivery is one probe of its week's primary key even when the plan
// was made while the week's partition was small
// (TestRecordPlanDoesNotDependOnStatistics), and an asynchronous commit:
// losing a claim or a record in a Postgres crash only sends a delivery
// again, which at-least-once delivery allows.
var recordSettings = append([][2]string{{"synchronous_commit", "off"}}, keyLookups...)

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
	TraceContext   []byte // the event's (tracing.Carry); nil when it carries none
	Sequence       int64  // its number in its FIFO line (webhook-sequence); 0 on other endpoints
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

// Claim is what a claim found for one endpoint.
type Claim struct {
	// Deliveries are the due deliveries claimed, oldest due first.
	Deliveries []Claimed
	// NextDue is, when none was due, when the endpoint's earliest queued
	// delivery is; nil when it has none queued.
	NextDue *time.Time
	// Handed is true when the deliveries were handed over (Nudger.Hand),
	// not claimed.
	Handed bool
}

// ClaimRequest asks for up to N of an endpoint's due deliveries after a
// position in its queue (ClaimDueDeliveries says why).
type ClaimRequest struct {
	EndpointID uuid.UUID
	N          int
	After      Position
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

// ReadTarget reads what a run needs to send to the endpoint, as
// StepTx.LockEndpoint does but without its lock and outside any
// transaction: for a run whose last reading said the endpoint needs
// nothing decided under its lock, to read it again (knownTarget.stale).
// A deleted endpoint is sluice.ErrNotFound.
func (d *DB) ReadTarget(ctx context.Context, endpointID uuid.UUID) (Target, error) {
	row, err := d.groupClaim.ReadEndpointForDispatch(ctx, endpointID)
	if err != nil {
		return Target{}, fmt.Errorf("read endpoint for dispatch: %w", store.NotFound(err))
	}
	return endpointReader{st: d.st, q: d.groupClaim}.target(ctx, dbq.LockEndpointForDispatchRow(row))
}

// ClaimUnlocked claims up to n of an endpoint's due deliveries without
// touching the endpoint row: for a run that knows (from a reading of the
// endpoint less than a second ago) that the endpoint has no rate limit, no
// throttle and a healthy circuit, so there is nothing to decide or save.
// It is one read, outside any transaction (ClaimDueDeliveries says why
// nothing is locked).
func (d *DB) ClaimUnlocked(ctx context.Context, endpointID uuid.UUID, n int) ([]Claimed, error) {
	claimed, err := d.ClaimUnlockedMany(ctx, []ClaimRequest{{EndpointID: endpointID, N: n}})
	if err != nil {
		return nil, err
	}
	return claimed[0].Deliveries, nil
}

// ClaimUnlockedMany is ClaimUnlocked for many endpoints in one statement: the
// unlocked claims of concurrent runs, group-committed (claimer). It returns
// what each claim found, in the order of claims.
func (d *DB) ClaimUnlockedMany(ctx context.Context, claims []ClaimRequest) ([]Claim, error) {
	return claimDue(ctx, d.groupClaim, claims)
}

// RecordUnlocked stores attempts that change no endpoint's flow state, of any
// endpoints, in one statement.
func (d *DB) RecordUnlocked(ctx context.Context, outcomes []Outcome) error {
	if err := d.unlockedRecord.RecordOutcomes(ctx, outcomeParams(outcomes)); err != nil {
		return fmt.Errorf("record outcomes: %w", err)
	}
	return nil
}

// Begin begins a claim or a record step. Its commit does not wait for the
// WAL flush (recordSettings says why).
func (d *DB) Begin(ctx context.Context) (*StepTx, error) {
	return beginStep(ctx, d.st, stepBegin)
}

// BeginSync begins a step that changes River's jobs (park, finish, yield):
// synchronously committed.
func (d *DB) BeginSync(ctx context.Context) (*StepTx, error) {
	return beginStep(ctx, d.st, syncStepBegin)
}

// The steps' settings come with their connections (store.BeginStep). A
// step that changes River's jobs keeps keyLookups too, since River's job
// completion in it (JobSetStateIfRunningMany) would otherwise be planned
// for its values on every call.
var (
	stepBegin     = recordSettings
	syncStepBegin = keyLookups
)

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
			EventType: r.Type, Payload: r.Payload, EventCreatedAt: r.EventCreatedAt, TraceContext: r.TraceContext,
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
		p.WeekLos[i], p.WeekHis[i] = store.WeekBounds(o.EventID)
		if o.Failed {
			p.Failed[i] = 1
		}
		p.Ats[i], p.StatusCodes[i], p.Errors[i] = o.At, int32(o.StatusCode), o.Error
		p.LatenciesMs[i], p.Bodies[i] = int32(o.LatencyMS), o.ResponseBody
	}
	return p
}

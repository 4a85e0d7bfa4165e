package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// IdempotencyWindow is how long an Idempotency-Key keeps answering with the
// event it first created.
const IdempotencyWindow = 24 * time.Hour

// ErrIdempotencyMismatch reports a reused Idempotency-Key with a different
// request body.
var ErrIdempotencyMismatch = fmt.Errorf("%w: this Idempotency-Key was used with a different event", sluice.ErrConflict)

// CreateEvent stores one event and queues its fan-out in the same
// transaction. With an idempotency key seen in the last 24 hours it creates
// nothing and returns the first event, with created false.
func (s *Store) CreateEvent(ctx context.Context, tenantID uuid.UUID, ev sluice.NewEvent, jobs JobQueue) (sluice.Event, bool, error) {
	var (
		out     sluice.Event
		created bool
	)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if ev.IdempotencyKey != "" {
			first, found, err := recentEventByKey(ctx, q, tenantID, ev.IdempotencyKey)
			if err != nil {
				return err
			}
			if found {
				out = first
				if first.Type != ev.Type || !bytes.Equal(first.Payload, ev.Payload) ||
					deref(first.Consumer) != deref(ev.Consumer) || first.Broadcast != ev.Broadcast {
					return ErrIdempotencyMismatch
				}
				return nil
			}
		}
		row, err := insertEvent(ctx, q, tenantID, ev)
		if err != nil {
			return err
		}
		out, created = eventFromRow(row), true
		return jobs.FanOut(ctx, tx, []uuid.UUID{row.ID})
	})
	return out, created, err
}

// recentEventByKey takes the tenant's lock on an Idempotency-Key, until
// the transaction ends, and returns the event the key created in the last
// IdempotencyWindow, if any. Holding the lock, a second request with the
// same key waits for the first to commit and then sees its event.
func recentEventByKey(ctx context.Context, q *dbq.Queries, tenantID uuid.UUID, key string) (sluice.Event, bool, error) {
	if err := q.LockIdempotencyKey(ctx, tenantID.String()+":"+key); err != nil {
		return sluice.Event{}, false, err
	}
	row, err := q.RecentEventByIdempotencyKey(ctx, dbq.RecentEventByIdempotencyKeyParams{
		TenantID: tenantID, IdempotencyKey: &key, Since: time.Now().Add(-IdempotencyWindow),
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return sluice.Event{}, false, nil
	}
	if err != nil {
		return sluice.Event{}, false, err
	}
	return eventFromRow(row), true, nil
}

func insertEvent(ctx context.Context, q *dbq.Queries, tenantID uuid.UUID, ev sluice.NewEvent) (dbq.Event, error) {
	var key *string
	if ev.IdempotencyKey != "" {
		key = &ev.IdempotencyKey
	}
	return q.InsertEvent(ctx, dbq.InsertEventParams{
		ID: newID(), TenantID: tenantID, Type: ev.Type, Payload: ev.Payload,
		CoalesceKey: ev.CoalesceKey, IdempotencyKey: key, Consumer: ev.Consumer, Broadcast: ev.Broadcast,
	})
}

// TenantEvent is an event to store for a tenant.
type TenantEvent struct {
	TenantID uuid.UUID
	Event    sluice.NewEvent
}

// MaxInlineDeliveries bounds the deliveries CreateTenantEvents makes in its
// own transaction; a group of events that would make more is fanned out by
// a job instead, so that a broadcast to thousands of endpoints does not
// hold up the posts it was grouped with.
const MaxInlineDeliveries = 1000

// CreateTenantEvents stores events of any tenants (a group of single
// posts, or one tenant's batch) and makes their deliveries in the same
// transaction, so that a post costs no fan-out job: no job row written,
// fetched and completed. It returns the events in input order and the
// endpoints whose queues changed (Touched), which the caller nudges after
// the commit (dispatch.Nudger.Nudge).
//
// A group of up to maxInsertEvents events with neither coalesce keys nor
// consumers is one statement (insertRouted). Others go through a
// transaction: the events (see insertEvents), then their routing and
// deliveries. Events with a coalesce key, and groups that would make more
// than MaxInlineDeliveries deliveries, get a fan-out job in that
// transaction instead. Coalescing updates queued deliveries, and so waits
// on, and can deadlock with, the dispatchers recording those rows: a
// fan-out job retries that, but a POST would fail. Idempotency keys are
// not looked at: events that carry one go through CreateEvent.
func (s *Store) CreateTenantEvents(ctx context.Context, evs []TenantEvent, jobs JobQueue) ([]sluice.Event, Touched, error) {
	out := newEvents(evs)
	if oneStatement(out) {
		touched, err := s.insertRouted(ctx, out)
		if !errors.Is(err, errOverInline) {
			return out, touched, err
		}
	}
	var touched Touched
	err := s.inRoutingTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := insertEvents(ctx, tx, q, out); err != nil {
			return err
		}
		inline, keyed := splitKeyed(out)
		plan, err := planFanOut(ctx, q, inline)
		if err != nil {
			return err
		}
		if plan.deliveries() > MaxInlineDeliveries {
			return jobs.FanOut(ctx, tx, eventIDs(out))
		}
		endpoints, _, err := plan.insert(ctx)
		if err != nil {
			return err
		}
		touched = TouchedWithout(endpoints)
		if len(keyed) == 0 {
			return nil
		}
		return jobs.FanOut(ctx, tx, keyed)
	})
	return out, touched, err
}

// errOverInline is insertRouted's answer for a group that would make more
// than MaxInlineDeliveries deliveries: it stored nothing.
var errOverInline = errors.New("more deliveries than are made inline")

// insertRouted stores evs, none with a coalesce key or a consumer, and
// their deliveries with one statement in one round trip
// (InsertRoutedEvents: events, routing and deliveries, where a transaction
// takes five round trips) and returns the deliveries it made, whole.
func (s *Store) insertRouted(ctx context.Context, evs []sluice.Event) (Touched, error) {
	e := eventsParams(evs)
	p := dbq.InsertRoutedEventsParams{
		Ids: e.Ids, TenantIds: e.TenantIds, Types: e.Types, Payloads: e.Payloads,
		Broadcasts: e.Broadcasts, CreatedAts: e.CreatedAts,
		MaxDeliveries: MaxInlineDeliveries,
	}
	for _, ev := range evs {
		for _, pattern := range sluice.CandidatePatterns(ev.Type) {
			p.PatternEvents = append(p.PatternEvents, ev.ID)
			p.Patterns = append(p.Patterns, pattern)
		}
	}
	rows, err := s.routed.InsertRoutedEvents(ctx, p)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == overInlineCode {
		return nil, errOverInline
	}
	if err != nil {
		return nil, err
	}
	return touchedWith(evs, rows), nil
}

// overInlineCode is the SQLSTATE of sluice_within_inline_limit's error
// (00017_routed_insert.sql).
const overInlineCode = "SL001"

// oneStatement reports whether evs are a group insertRouted takes: small,
// and none with a coalesce key or a consumer.
func oneStatement(evs []sluice.Event) bool {
	return len(evs) <= maxInsertEvents && !slices.ContainsFunc(evs, func(ev sluice.Event) bool {
		return ev.CoalesceKey != nil || ev.Consumer != nil
	})
}

// newEvents gives each event an id and its creation time, and returns them
// as they will be stored: the time to the microsecond, as Postgres keeps it,
// so the answer to the post, the events read back and the deliveries' bodies
// agree.
func newEvents(evs []TenantEvent) []sluice.Event {
	now := time.Now().UTC().Truncate(time.Microsecond)
	out := make([]sluice.Event, len(evs))
	for i, te := range evs {
		ev := te.Event
		out[i] = sluice.Event{
			ID: newID(), TenantID: te.TenantID, Type: ev.Type, Payload: ev.Payload, CoalesceKey: ev.CoalesceKey,
			Consumer: ev.Consumer, Broadcast: ev.Broadcast, CreatedAt: now,
		}
	}
	return out
}

// maxInsertEvents is the largest group of events stored with one INSERT
// (InsertEvents, or InsertRoutedEvents with their deliveries): one round
// trip, where COPY takes two and, for a few rows, more of Postgres's time
// (a single post's: 0.12 ms, against 0.19 by COPY, at 25 events/s). Larger
// groups go by COPY, which costs less per row.
const maxInsertEvents = 32

// insertEvents stores evs in tx: with InsertEvents, or by COPY when there
// are more than maxInsertEvents.
func insertEvents(ctx context.Context, tx pgx.Tx, q *dbq.Queries, evs []sluice.Event) error {
	if len(evs) > maxInsertEvents {
		return copyEvents(ctx, tx, evs)
	}
	return q.InsertEvents(ctx, eventsParams(evs))
}

// eventsParams lays evs out as InsertEvents's columns.
func eventsParams(evs []sluice.Event) dbq.InsertEventsParams {
	n := len(evs)
	p := dbq.InsertEventsParams{
		Ids: make([]uuid.UUID, n), TenantIds: make([]uuid.UUID, n), Types: make([]string, n), Payloads: make([]string, n),
		CoalesceKeys: make([]string, n), Consumers: make([]string, n), HasConsumers: make([]bool, n),
		Broadcasts: make([]bool, n), CreatedAts: make([]time.Time, n),
	}
	for i, ev := range evs {
		p.Ids[i], p.TenantIds[i], p.Types[i], p.Payloads[i] = ev.ID, ev.TenantID, ev.Type, string(ev.Payload)
		p.Broadcasts[i], p.CreatedAts[i] = ev.Broadcast, ev.CreatedAt
		if ev.CoalesceKey != nil {
			p.CoalesceKeys[i] = *ev.CoalesceKey // never "": the API refuses an empty key
		}
		if ev.Consumer != nil {
			p.Consumers[i], p.HasConsumers[i] = *ev.Consumer, true
		}
	}
	return p
}

func copyEvents(ctx context.Context, tx pgx.Tx, evs []sluice.Event) error {
	rows := make([][]any, len(evs))
	for i, ev := range evs {
		rows[i] = []any{ev.ID, ev.TenantID, ev.Type, string(ev.Payload), ev.CoalesceKey, ev.Consumer, ev.Broadcast, ev.CreatedAt}
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"events"},
		[]string{"id", "tenant_id", "type", "payload", "coalesce_key", "consumer", "broadcast", "created_at"}, pgx.CopyFromRows(rows))
	return err
}

// splitKeyed returns, in order, the events without a coalesce key as rows
// to plan deliveries for, and the ids of those with one.
func splitKeyed(evs []sluice.Event) ([]dbq.Event, []uuid.UUID) {
	var (
		plain []dbq.Event
		keyed []uuid.UUID
	)
	for _, ev := range evs {
		if ev.CoalesceKey != nil {
			keyed = append(keyed, ev.ID)
			continue
		}
		plain = append(plain, dbq.Event{
			ID: ev.ID, TenantID: ev.TenantID, Type: ev.Type, Consumer: ev.Consumer, Broadcast: ev.Broadcast,
		})
	}
	return plain, keyed
}

func eventIDs(evs []sluice.Event) []uuid.UUID {
	ids := make([]uuid.UUID, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	return ids
}

// GetEvent returns one of a tenant's events with its deliveries.
func (s *Store) GetEvent(ctx context.Context, tenantID, id uuid.UUID) (sluice.Event, []sluice.Delivery, error) {
	row, err := s.q.GetEvent(ctx, dbq.GetEventParams{TenantID: tenantID, ID: id})
	if err != nil {
		return sluice.Event{}, nil, notFound(err)
	}
	drows, err := s.q.DeliveriesForEvent(ctx, dbq.DeliveriesForEventParams{TenantID: tenantID, EventID: id})
	if err != nil {
		return sluice.Event{}, nil, err
	}
	deliveries := make([]sluice.Delivery, len(drows))
	for i, d := range drows {
		deliveries[i] = deliveryFromRow(d)
	}
	return eventFromRow(row), deliveries, nil
}

// ListEvents returns a page of a tenant's events, newest first, optionally
// of one type.
func (s *Store) ListEvents(ctx context.Context, tenantID uuid.UUID, eventType *string, p sluice.PageParams) (sluice.Page[sluice.Event], error) {
	return s.ListConsumerEvents(ctx, tenantID, nil, eventType, p)
}

// ListConsumerEvents is ListEvents as one consumer sees them when consumer
// is not nil: the events addressed to it and the broadcasts.
func (s *Store) ListConsumerEvents(ctx context.Context, tenantID uuid.UUID, consumer, eventType *string, p sluice.PageParams) (sluice.Page[sluice.Event], error) {
	rows, err := s.q.ListEvents(ctx, dbq.ListEventsParams{
		TenantID: tenantID, Type: eventType, Consumer: consumer, After: p.After, MaxRows: limitRows(p),
	})
	if err != nil {
		return sluice.Page[sluice.Event]{}, err
	}
	return page(rows, p, func(r dbq.Event) uuid.UUID { return r.ID },
		func(r dbq.Event) (sluice.Event, error) { return eventFromRow(r), nil })
}

func eventFromRow(r dbq.Event) sluice.Event {
	return sluice.Event{
		ID: r.ID, TenantID: r.TenantID, Type: r.Type, Payload: r.Payload,
		CoalesceKey: r.CoalesceKey, Consumer: r.Consumer, Broadcast: r.Broadcast, CreatedAt: r.CreatedAt,
	}
}

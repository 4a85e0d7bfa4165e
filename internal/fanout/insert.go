package fanout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/secretbox"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// TenantEvent is an event to store for a tenant.
type TenantEvent struct {
	TenantID uuid.UUID
	Event    sluice.NewEvent
	// ID and CreatedAt, when set, are the event's as stored (CreatedAt to
	// the microsecond): a caller that may store the same event again after
	// a commit whose outcome it could not learn keeps them, so that the
	// second try meets the first try's row (ingest). Zero: Insert makes
	// them.
	ID        uuid.UUID
	CreatedAt time.Time
}

// MaxInlineDeliveries bounds the deliveries Insert makes in its own
// transaction; a group of events that would make more is fanned out by a
// job instead, so that a broadcast to thousands of endpoints does not hold
// up the posts it was grouped with.
const MaxInlineDeliveries = 1000

// Insert stores events of any tenants (a group of single posts, or one
// tenant's batch) and makes their deliveries in the same transaction, so
// that a post costs no fan-out job: no job row written, fetched and
// completed. It returns the events in input order and the deliveries made,
// by endpoint, which the caller hands over or nudges after the commit
// (dispatch.Nudger.Hand).
//
// A group of up to maxInsertEvents events with neither coalesce keys nor
// consumers is one statement (insertRouted). Others go through a
// transaction: the events (see insertEvents), then their routing and
// deliveries. Events with a coalesce key, and groups that would make more
// than MaxInlineDeliveries deliveries (or, to subscriptions with filters,
// could before filtering: their filters are then evaluated once, by the
// job), get a fan-out job in that transaction instead. Coalescing updates queued deliveries, and so waits
// on, and can deadlock with, the dispatchers recording those rows: a
// fan-out job retries that, but a POST would fail. Idempotency keys are
// not looked at: events that carry one go through InsertOne.
func Insert(ctx context.Context, st *store.Store, evs []TenantEvent, nudger dispatch.TxNudger) ([]sluice.Event, dispatch.Made, error) {
	out := newEvents(evs)
	stored, err := sealEvents(ctx, st.Payloads(), out)
	if err != nil {
		return out, nil, fmt.Errorf("store %d events: %w", len(out), err)
	}
	if oneStatement(stored) {
		made, err := insertRouted(ctx, st, stored)
		if err == nil {
			return out, made, nil
		}
		if !errors.Is(err, errOverInline) && !errors.Is(err, errSealedFilter) {
			return out, nil, fmt.Errorf("store %d events: %w", len(out), err)
		}
	}
	var touched dispatch.Made
	err = st.InRoutingTx(ctx, func(tx store.Tx) error {
		if err := insertEvents(ctx, tx, stored); err != nil {
			return fmt.Errorf("insert events: %w", err)
		}
		inline, keyed := splitKeyed(stored)
		plan, err := planFanOut(ctx, tx.Q, st.Payloads(), inline, MaxInlineDeliveries)
		if errors.Is(err, errOverLimit) {
			return queueFanOut(ctx, tx, nudger, stored)
		}
		if err != nil {
			return err
		}
		endpoints, _, err := plan.insert(ctx)
		if err != nil {
			return err
		}
		touched = make(dispatch.Made, len(endpoints))
		for _, id := range endpoints {
			touched[id] = nil // made, not known
		}
		if len(keyed) == 0 {
			return nil
		}
		return queueFanOut(ctx, tx, nudger, keyed)
	})
	if err != nil {
		return out, nil, fmt.Errorf("store %d events: %w", len(out), err)
	}
	return out, touched, nil
}

// queueFanOut queues the fan-out job of evs in tx through nudger, and marks them unrouted
// until it has run (markUnrouted).
func queueFanOut(ctx context.Context, tx store.Tx, nudger dispatch.TxNudger, evs []sluice.Event) error {
	if err := markUnrouted(ctx, tx.Q, evs); err != nil {
		return err
	}
	if err := nudger.FanOut(ctx, tx.Tx, eventIDs(evs)); err != nil {
		return fmt.Errorf("queue fan-out of %d events: %w", len(evs), err)
	}
	return nil
}

// markUnrouted records events whose deliveries a fan-out job will make,
// until it has (Events forgets them in its transaction): a FIFO endpoint
// sends none of its tenant's later events meanwhile, since the earlier
// event's delivery, once made, may belong in front of them
// (dispatch.claimFIFO).
func markUnrouted(ctx context.Context, q *dbq.Queries, evs []sluice.Event) error {
	p := dbq.MarkUnroutedParams{TenantIds: make([]uuid.UUID, len(evs)), EventIds: make([]uuid.UUID, len(evs))}
	for i, ev := range evs {
		p.TenantIds[i], p.EventIds[i] = ev.TenantID, ev.ID
	}
	if err := q.MarkUnrouted(ctx, p); err != nil {
		return fmt.Errorf("mark %d events unrouted: %w", len(evs), err)
	}
	return nil
}

// errOverInline is insertRouted's answer for a group that would make more
// than MaxInlineDeliveries deliveries: it stored nothing.
var errOverInline = errors.New("more deliveries than are made inline")

// insertRouted stores evs, none with a coalesce key or a consumer, and
// their deliveries with one statement in one round trip
// (InsertRoutedEvents: events, routing and deliveries, where a transaction
// takes five round trips) and returns the deliveries it made.
func insertRouted(ctx context.Context, st *store.Store, evs []sluice.Event) (dispatch.Made, error) {
	e := eventsParams(evs)
	p := dbq.InsertRoutedEventsParams{
		Ids: e.Ids, TenantIds: e.TenantIds, Types: e.Types, Payloads: e.Payloads,
		Broadcasts: e.Broadcasts, CreatedAts: e.CreatedAts, TraceContexts: e.TraceContexts,
		OrderingKeys: e.OrderingKeys, MaxDeliveries: MaxInlineDeliveries,
	}
	for _, ev := range evs {
		for _, pattern := range sluice.CandidatePatterns(ev.Type) {
			p.PatternEvents = append(p.PatternEvents, ev.ID)
			p.Patterns = append(p.Patterns, pattern)
		}
	}
	rows, err := st.Routed().InsertRoutedEvents(ctx, p)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == overInlineCode {
		return nil, errOverInline
	}
	if errors.As(err, &pgErr) && pgErr.Code == sealedFilterCode {
		return nil, errSealedFilter
	}
	if err != nil {
		return nil, fmt.Errorf("insert routed events: %w", err)
	}
	return made(evs, rows), nil
}

// overInlineCode is the SQLSTATE of sluice_within_inline_limit's error
// (00017_routed_insert.sql).
const overInlineCode = "SL001"

// errSealedFilter is insertRouted's answer for a group where a filter met a
// sealed payload, which Postgres cannot read: it stored nothing, and the
// transaction's routing matches it in Go (routes.applyFilters).
var errSealedFilter = errors.New("a filter met a sealed payload")

// sealedFilterCode is the SQLSTATE of sluice_sealed_payload's error
// (00044_tenant_data_keys.sql).
const sealedFilterCode = "SL002"

// sealEvents returns evs as they are stored: the same events when
// payloads are not sealed, else copies with their payloads sealed under
// their tenants' data keys.
func sealEvents(ctx context.Context, pl *secretbox.Payloads, evs []sluice.Event) ([]sluice.Event, error) {
	if !pl.Sealing() {
		return evs, nil
	}
	stored := slices.Clone(evs)
	for i := range stored {
		sealed, err := pl.SealJSON(ctx, stored[i].TenantID, stored[i].Payload)
		if err != nil {
			return nil, fmt.Errorf("seal payload: %w", err)
		}
		stored[i].Payload = sealed
	}
	return stored, nil
}

// oneStatement reports whether evs are a group insertRouted takes: small,
// and none with a coalesce key or a consumer.
func oneStatement(evs []sluice.Event) bool {
	return len(evs) <= maxInsertEvents && !slices.ContainsFunc(evs, func(ev sluice.Event) bool {
		return ev.CoalesceKey != nil || ev.Consumer != nil
	})
}

// newEvents gives each event without one an id and its creation time, and
// returns them as they will be stored: the time to the microsecond, as
// Postgres keeps it, so the answer to the post, the events read back and
// the deliveries' bodies agree.
func newEvents(evs []TenantEvent) []sluice.Event {
	now := time.Now().UTC().Truncate(time.Microsecond)
	out := make([]sluice.Event, len(evs))
	for i, te := range evs {
		ev := te.Event
		id, at := te.ID, te.CreatedAt
		if id == uuid.Nil {
			id = store.NewID()
		}
		if at.IsZero() {
			at = now
		}
		out[i] = sluice.Event{
			ID: id, TenantID: te.TenantID, Type: ev.Type, Payload: ev.Payload, CoalesceKey: ev.CoalesceKey,
			Consumer: ev.Consumer, Broadcast: ev.Broadcast, CreatedAt: at, TraceContext: ev.TraceContext,
			OrderingKey: ev.OrderingKey,
		}
	}
	return out
}

// maxInsertEvents is the largest group of events stored with one INSERT
// (InsertEvents, or InsertRoutedEvents with their deliveries): one round
// trip, where COPY takes two and, for a few rows, more of Postgres's time.
// Larger groups go by COPY, which costs less per row.
const maxInsertEvents = 32

// insertEvents stores evs in tx: with InsertEvents, or by COPY when there
// are more than maxInsertEvents.
func insertEvents(ctx context.Context, tx store.Tx, evs []sluice.Event) error {
	if len(evs) > maxInsertEvents {
		return copyEvents(ctx, tx, evs)
	}
	if err := tx.Q.InsertEvents(ctx, eventsParams(evs)); err != nil {
		return fmt.Errorf("insert events: %w", err)
	}
	return nil
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
		if ev.TraceContext != nil { // nil while no event has one: no array to send
			if p.TraceContexts == nil {
				p.TraceContexts = make([]string, n)
			}
			p.TraceContexts[i] = string(ev.TraceContext)
		}
		if ev.CoalesceKey != nil {
			p.CoalesceKeys[i] = *ev.CoalesceKey // never "": the API refuses an empty key
		}
		if ev.OrderingKey != nil { // as TraceContexts: nil while no event has one
			if p.OrderingKeys == nil {
				p.OrderingKeys = make([]string, n)
			}
			p.OrderingKeys[i] = *ev.OrderingKey // never "": the API refuses an empty key
		}
		if ev.Consumer != nil {
			p.Consumers[i], p.HasConsumers[i] = *ev.Consumer, true
		}
	}
	return p
}

func copyEvents(ctx context.Context, tx store.Tx, evs []sluice.Event) error {
	rows := make([][]any, len(evs))
	for i, ev := range evs {
		var trace any // NULL
		if ev.TraceContext != nil {
			trace = ev.TraceContext
		}
		rows[i] = []any{ev.ID, ev.TenantID, ev.Type, string(ev.Payload), ev.CoalesceKey, ev.Consumer, ev.Broadcast, ev.CreatedAt, trace, ev.OrderingKey}
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"events"},
		[]string{"id", "tenant_id", "type", "payload", "coalesce_key", "consumer", "broadcast", "created_at", "trace_context", "ordering_key"},
		pgx.CopyFromRows(rows))
	if err != nil {
		return fmt.Errorf("copy events: %w", err)
	}
	return nil
}

// splitKeyed returns, in order, the events without a coalesce key as rows
// to plan deliveries for, and those with one.
func splitKeyed(evs []sluice.Event) ([]dbq.Event, []sluice.Event) {
	var (
		plain []dbq.Event
		keyed []sluice.Event
	)
	for _, ev := range evs {
		if ev.CoalesceKey != nil {
			keyed = append(keyed, ev)
			continue
		}
		plain = append(plain, dbq.Event{
			ID: ev.ID, TenantID: ev.TenantID, Type: ev.Type, Consumer: ev.Consumer, Broadcast: ev.Broadcast,
			OrderingKey: ev.OrderingKey, Payload: ev.Payload,
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

// made is the deliveries InsertRoutedEvents made of evs, as stored, by
// endpoint, each as a claim would return it.
func made(evs []sluice.Event, rows []dbq.InsertRoutedEventsRow) dispatch.Made {
	if len(rows) == 0 {
		return nil
	}
	byID := make(map[uuid.UUID]*sluice.Event, len(evs))
	for i := range evs {
		byID[evs[i].ID] = &evs[i]
	}
	m := make(dispatch.Made)
	for _, r := range rows {
		ev := byID[r.EventID]
		var due time.Time // now(), never NULL for a new delivery
		if r.NextAttemptAt != nil {
			due = *r.NextAttemptAt
		}
		m[r.EndpointID] = append(m[r.EndpointID], dispatch.Claimed{
			ID: r.ID, EventID: r.EventID, NextAttemptAt: due, EventType: ev.Type,
			Payload: ev.Payload, EventCreatedAt: ev.CreatedAt, TraceContext: ev.TraceContext,
		})
	}
	return m
}

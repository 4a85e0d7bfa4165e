package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

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

// CreateEvents stores a batch of one tenant's events with one COPY and
// queues one fan-out job for all of them, in one transaction. Events come
// back in input order.
func (s *Store) CreateEvents(ctx context.Context, tenantID uuid.UUID, evs []sluice.NewEvent, jobs JobQueue) ([]sluice.Event, error) {
	batch := make([]TenantEvent, len(evs))
	for i, ev := range evs {
		batch[i] = TenantEvent{TenantID: tenantID, Event: ev}
	}
	return s.CreateTenantEvents(ctx, batch, jobs)
}

// CreateTenantEvents is CreateEvents for events of any tenants. Idempotency
// keys are not looked at: events that carry one go through CreateEvent.
func (s *Store) CreateTenantEvents(ctx context.Context, evs []TenantEvent, jobs JobQueue) ([]sluice.Event, error) {
	now := time.Now().UTC()
	out := make([]sluice.Event, len(evs))
	ids := make([]uuid.UUID, len(evs))
	rows := make([][]any, len(evs))
	for i, te := range evs {
		ev := te.Event
		ids[i] = newID()
		out[i] = sluice.Event{
			ID: ids[i], TenantID: te.TenantID, Type: ev.Type, Payload: ev.Payload, CoalesceKey: ev.CoalesceKey,
			Consumer: ev.Consumer, Broadcast: ev.Broadcast, CreatedAt: now,
		}
		rows[i] = []any{ids[i], te.TenantID, ev.Type, string(ev.Payload), ev.CoalesceKey, ev.Consumer, ev.Broadcast, now}
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"events"},
			[]string{"id", "tenant_id", "type", "payload", "coalesce_key", "consumer", "broadcast", "created_at"}, pgx.CopyFromRows(rows))
		if err != nil {
			return err
		}
		return jobs.FanOut(ctx, tx, ids)
	})
	return out, err
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

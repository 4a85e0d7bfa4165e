package store

import (
	"context"
	"fmt"
	"math"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// InsertEvent stores one event in the transaction, as posted.
func (t Tx) InsertEvent(ctx context.Context, tenantID uuid.UUID, ev sluice.NewEvent) (sluice.Event, error) {
	row, err := t.Q.InsertEvent(ctx, dbq.InsertEventParams{
		ID: NewID(), TenantID: tenantID, Type: ev.Type, Payload: ev.Payload,
		CoalesceKey: ev.CoalesceKey, IdempotencyKey: optText(ev.IdempotencyKey), Consumer: ev.Consumer, Broadcast: ev.Broadcast,
		TraceContext: ev.TraceContext, OrderingKey: ev.OrderingKey,
	})
	if err != nil {
		return sluice.Event{}, fmt.Errorf("insert event: %w", err)
	}
	return EventFromRow(row), nil
}

// GetEvent returns one of a tenant's events with its deliveries.
func (s *Store) GetEvent(ctx context.Context, tenantID, id uuid.UUID) (sluice.Event, []sluice.Delivery, error) {
	row, err := s.q.GetEvent(ctx, dbq.GetEventParams{TenantID: tenantID, ID: id})
	if err != nil {
		return sluice.Event{}, nil, NotFound(err)
	}
	drows, err := s.q.DeliveriesForEvent(ctx, dbq.DeliveriesForEventParams{TenantID: tenantID, EventID: id})
	if err != nil {
		return sluice.Event{}, nil, fmt.Errorf("deliveries of event: %w", err)
	}
	deliveries := make([]sluice.Delivery, len(drows))
	for i, d := range drows {
		deliveries[i] = DeliveryFromRow(d)
	}
	ev := EventFromRow(row)
	if ev.Payload, err = s.payloads.OpenJSON(ctx, tenantID, ev.Payload); err != nil {
		return sluice.Event{}, nil, fmt.Errorf("open payload: %w", err)
	}
	return ev, deliveries, nil
}

// ListEvents returns a page of a tenant's events, newest first, optionally
// of one type; as one consumer sees them when consumer is not nil: the
// events addressed to it and the broadcasts.
func (s *Store) ListEvents(ctx context.Context, tenantID uuid.UUID, consumer, eventType *string, p sluice.PageParams) (sluice.Page[sluice.Event], error) {
	rows, err := s.q.ListEvents(ctx, dbq.ListEventsParams{
		TenantID: tenantID, Type: eventType, Consumer: consumer, After: p.After, MaxRows: limitRows(p),
		MaxBytes: math.MaxInt64, // never cut: its callers read small pages whole
	})
	if err != nil {
		return sluice.Page[sluice.Event]{}, fmt.Errorf("list events: %w", err)
	}
	return Page(rows, p, func(r dbq.ListEventsRow) uuid.UUID { return r.ID },
		func(r dbq.ListEventsRow) (sluice.Event, error) { return EventFromRow(dbq.Event(r)), nil })
}

// EventFromRow is an events row as the domain's Event.
func EventFromRow(r dbq.Event) sluice.Event {
	return sluice.Event{
		ID: r.ID, TenantID: r.TenantID, Type: r.Type, Payload: r.Payload,
		CoalesceKey: r.CoalesceKey, Consumer: r.Consumer, Broadcast: r.Broadcast, CreatedAt: r.CreatedAt,
		OrderingKey: r.OrderingKey,
	}
}

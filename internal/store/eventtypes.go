package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// UpsertEventType creates or replaces an entry of the tenant's event-type
// catalogue, and reports whether it created it.
func (s *Store) UpsertEventType(ctx context.Context, tenantID uuid.UUID, et sluice.EventType) (sluice.EventType, bool, error) {
	row, err := s.q.UpsertEventType(ctx, dbq.UpsertEventTypeParams{
		ID: NewID(), TenantID: tenantID, Name: et.Name, Description: et.Description,
		Example: nullableJSON(et.Example), Schema: nullableJSON(et.Schema), Deprecated: et.Deprecated,
	})
	if err != nil {
		return sluice.EventType{}, false, fmt.Errorf("upsert event type: %w", err)
	}
	return eventTypeFromRow(row.EventType), row.Inserted, nil
}

// GetEventType returns one entry of the tenant's catalogue.
func (s *Store) GetEventType(ctx context.Context, tenantID uuid.UUID, name string) (sluice.EventType, error) {
	row, err := s.q.GetEventType(ctx, dbq.GetEventTypeParams{TenantID: tenantID, Name: name})
	if err != nil {
		return sluice.EventType{}, NotFound(err)
	}
	return eventTypeFromRow(row), nil
}

// ListEventTypes returns a page of the tenant's catalogue, newest first.
func (s *Store) ListEventTypes(ctx context.Context, tenantID uuid.UUID, p sluice.PageParams) (sluice.Page[sluice.EventType], error) {
	rows, err := s.q.ListEventTypes(ctx, dbq.ListEventTypesParams{TenantID: tenantID, After: p.After, MaxRows: limitRows(p)})
	if err != nil {
		return sluice.Page[sluice.EventType]{}, fmt.Errorf("list event types: %w", err)
	}
	return Page(rows, p, func(r dbq.EventType) uuid.UUID { return r.ID },
		func(r dbq.EventType) (sluice.EventType, error) { return eventTypeFromRow(r), nil })
}

// EventSchemas are the tenant's event types that have a schema, each with
// its name, schema and update time only.
func (s *Store) EventSchemas(ctx context.Context, tenantID uuid.UUID) ([]sluice.EventType, error) {
	rows, err := s.q.EventSchemas(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("event schemas: %w", err)
	}
	out := make([]sluice.EventType, len(rows))
	for i, r := range rows {
		out[i] = sluice.EventType{Name: r.Name, Schema: r.Schema, UpdatedAt: r.UpdatedAt}
	}
	return out, nil
}

func nullableJSON(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return nil
	}
	return raw
}

func eventTypeFromRow(r dbq.EventType) sluice.EventType {
	return sluice.EventType{
		ID: r.ID, Name: r.Name, Description: r.Description,
		Example: json.RawMessage(r.Example), Schema: json.RawMessage(r.Schema),
		Deprecated: r.Deprecated, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

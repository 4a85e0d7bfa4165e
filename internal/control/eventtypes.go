package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/eventschema"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// The event-type catalogue: the tenant's entries, which a change of its
// own may make, replace and delete, and Sluice's own types, which every
// caller reads and none changes. An entry's schema validates the events
// of its type as they are posted (EventSchemas).

// EventTypeInput is the whole of a catalogue entry but its name. Example
// and Schema hold JSON text, or nothing.
type EventTypeInput struct {
	Description string
	Example     json.RawMessage
	Schema      json.RawMessage
	Deprecated  bool
}

// PutEventType creates the tenant's entry name or replaces it, and
// reports whether it created it: event_type.created or
// event_type.updated, with the fields the update changed.
func (c *Control) PutEventType(ctx context.Context, who Caller, name string, in EventTypeInput) (sluice.EventType, bool, error) {
	return c.putEventType(ctx, who, name, in, createOrUpdate)
}

// CreateEventType creates the tenant's entry name; a name in the
// catalogue already is sluice.ErrConflict, never overwritten.
func (c *Control) CreateEventType(ctx context.Context, who Caller, name string, in EventTypeInput) (sluice.EventType, error) {
	out, _, err := c.putEventType(ctx, who, name, in, createOnly)
	return out, err
}

// UpdateEventType replaces the tenant's entry name; its name never
// changes.
func (c *Control) UpdateEventType(ctx context.Context, who Caller, name string, in EventTypeInput) (sluice.EventType, error) {
	out, _, err := c.putEventType(ctx, who, name, in, updateOnly)
	return out, err
}

func (c *Control) putEventType(ctx context.Context, who Caller, name string, in EventTypeInput, mode putMode) (sluice.EventType, bool, error) {
	et := sluice.EventType{Name: name, Description: in.Description, Example: in.Example, Schema: in.Schema, Deprecated: in.Deprecated}
	v := &sluice.ValidationError{}
	checkEventTypeName(name, v)
	var bad *sluice.ValidationError
	if err := checkEventType(et); errors.As(err, &bad) {
		v.Fields = append(v.Fields, bad.Fields...)
	}
	if err := v.Err(); err != nil {
		return sluice.EventType{}, false, err
	}
	act := EventTypeUpdated
	if mode == createOnly {
		act = EventTypeCreated
	}
	var (
		out     sluice.EventType
		created bool
	)
	err := c.change(ctx, who, act, func(ctx context.Context, e *sluice.AuditEntry) error {
		if who.portal() {
			return sluice.ErrNotFound
		}
		old, err := c.store.GetEventType(ctx, who.Tenant, name)
		switch {
		case err == nil && mode == createOnly:
			return fmt.Errorf("%w: the event type %s exists already", sluice.ErrConflict, name)
		case errors.Is(err, sluice.ErrNotFound) && mode == updateOnly:
			return err
		case err != nil && !errors.Is(err, sluice.ErrNotFound):
			return fmt.Errorf("put event type: %w", err)
		}
		existed := err == nil
		out, created, err = c.store.UpsertEventType(ctx, who.Tenant, et)
		if err != nil {
			return fmt.Errorf("put event type: %w", err)
		}
		e.ObjectID = &name
		if created {
			e.Action = string(EventTypeCreated)
		} else {
			e.Action = string(EventTypeUpdated)
		}
		if existed {
			e.Changed = eventTypeChanges(old, out)
		}
		return nil
	})
	if err != nil {
		return sluice.EventType{}, false, err
	}
	c.schemas.Forget(who.Tenant)
	return out, created, nil
}

// eventTypeChanges names the fields that differ between old and new.
func eventTypeChanges(old, new sluice.EventType) []string {
	var changed []string
	if old.Deprecated != new.Deprecated {
		changed = append(changed, "deprecated")
	}
	if old.Description != new.Description {
		changed = append(changed, "description")
	}
	if !bytes.Equal(old.Example, new.Example) {
		changed = append(changed, "example")
	}
	if !bytes.Equal(old.Schema, new.Schema) {
		changed = append(changed, "schema")
	}
	return changed
}

// EventType is one entry of the catalogue, Sluice's own types included
// (operational); an unknown or malformed name is sluice.ErrNotFound.
func (c *Control) EventType(ctx context.Context, who Caller, name string) (et sluice.EventType, operational bool, err error) {
	if !ValidEventTypeName(name) {
		return sluice.EventType{}, false, sluice.ErrNotFound
	}
	if et, ok := sluice.OperationalEventType(name); ok {
		return et, true, nil
	}
	et, err = c.store.GetEventType(ctx, who.Tenant, name)
	return et, false, err
}

// EventTypes is a page of the whole catalogue: Sluice's own types after
// the cursor ahead of the tenant's entries, newest first, keeping the
// page's limit (their ids sort above the tenant's, so the list stays one
// order a cursor walks).
func (c *Control) EventTypes(ctx context.Context, who Caller, p sluice.PageParams) (sluice.Page[sluice.EventType], error) {
	page, err := c.TenantEventTypes(ctx, who, p)
	if err != nil {
		return page, err
	}
	var items []sluice.EventType
	for _, et := range sluice.OperationalEventTypes() {
		if p.After == nil || bytes.Compare(et.ID[:], p.After[:]) < 0 {
			items = append(items, et)
		}
	}
	if len(items) == 0 {
		return page, nil
	}
	items = append(items, page.Items...)
	if len(items) <= p.Limit {
		page.Items = items
		return page, nil
	}
	next := items[p.Limit-1].ID
	return sluice.Page[sluice.EventType]{Items: items[:p.Limit], Next: &next}, nil
}

// TenantEventTypes is a page of the tenant's own entries, newest first.
func (c *Control) TenantEventTypes(ctx context.Context, who Caller, p sluice.PageParams) (sluice.Page[sluice.EventType], error) {
	return c.store.ListEventTypes(ctx, who.Tenant, p)
}

// DeleteEventType removes the tenant's entry name; subscriptions to the
// type and its events stay. Sluice's own types are refused.
func (c *Control) DeleteEventType(ctx context.Context, who Caller, name string) error {
	v := &sluice.ValidationError{}
	if sluice.IsReservedType(name) {
		checkEventTypeName(name, v)
		return v.Err()
	}
	err := c.change(ctx, who, EventTypeDeleted, func(ctx context.Context, e *sluice.AuditEntry) error {
		if who.portal() || !ValidEventTypeName(name) {
			return sluice.ErrNotFound
		}
		e.ObjectID = &name
		if err := store.ExecRows(ctx, c.store, (*dbq.Queries).DeleteEventType, dbq.DeleteEventTypeParams{TenantID: who.Tenant, Name: name}); err != nil {
			return fmt.Errorf("delete event type: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.schemas.Forget(who.Tenant)
	return nil
}

// EventSchemas are the compiled schemas of the tenants' event types, which
// the events posted are validated against. A change of the catalogue made
// here is seen at once; one made by another process, as the cache
// reloads.
func (c *Control) EventSchemas() *eventschema.Cache { return c.schemas }

func (c *Control) loadSchemas(ctx context.Context, tenantID uuid.UUID) ([]eventschema.Source, error) {
	types, err := c.store.EventSchemas(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("load event schemas: %w", err)
	}
	out := make([]eventschema.Source, len(types))
	for i, et := range types {
		out[i] = eventschema.Source{Name: et.Name, Schema: et.Schema, UpdatedAt: et.UpdatedAt}
	}
	return out, nil
}

package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/internal/eventschema"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/tenantrules"
)

// maxEventTypeBody leaves room for an example as large as a payload and
// the largest schema.
const maxEventTypeBody = maxPayloadBytes + eventschema.MaxSchemaBytes + 8<<10

// eventTypeInput is the body of PUT /v1/event-types/{name}: the whole entry.
type eventTypeInput struct {
	Description *string         `json:"description"`
	Example     json.RawMessage `json:"example"`
	Schema      json.RawMessage `json:"schema"`
	Deprecated  *bool           `json:"deprecated"`
}

// eventType validates in as the entry name (tenantrules.EventType).
func (in eventTypeInput) eventType(name string) (sluice.EventType, error) {
	et := sluice.EventType{Name: name, Example: jsonOrNil(in.Example), Schema: jsonOrNil(in.Schema)}
	if in.Description != nil {
		et.Description = *in.Description
	}
	if in.Deprecated != nil {
		et.Deprecated = *in.Deprecated
	}
	return et, tenantrules.EventType(et)
}

// jsonOrNil is nil for an absent or null field.
func jsonOrNil(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	return raw
}

// pathEventType parses the {name} path parameter; a malformed name names no
// event type, so it answers 404 like an unknown one.
func pathEventType(r *http.Request) (string, error) {
	name := chi.URLParam(r, "name")
	if !tenantrules.ValidEventTypeName(name) {
		return "", notFoundProblem(fmt.Sprintf("%q is not a valid event type name", name))
	}
	return name, nil
}

// reservedEventType refuses to change an entry of Sluice's own types.
func reservedEventType(name string) error {
	if !sluice.IsReservedType(name) {
		return nil
	}
	v := &sluice.ValidationError{}
	v.Add("name", "must not begin with %q: those types are Sluice's own", sluice.ReservedTypePrefix)
	return v.Err()
}

// putEventType is PUT /v1/event-types/{name}: 201 when it created the
// entry, 200 when it replaced it.
func (a *API) putEventType(w http.ResponseWriter, r *http.Request) error {
	name, err := pathEventType(r)
	if err != nil {
		return err
	}
	if err := reservedEventType(name); err != nil {
		return err
	}
	var in eventTypeInput
	if err := decodeJSON(w, r, &in, maxEventTypeBody); err != nil {
		return err
	}
	et, err := in.eventType(name)
	if err != nil {
		return err
	}
	tenantID := tenantFrom(r.Context()).ID
	out, created, err := a.store.UpsertEventType(r.Context(), tenantID, et)
	if err != nil {
		return err
	}
	a.schemas.Forget(tenantID)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, out)
	return nil
}

func (a *API) listEventTypes(w http.ResponseWriter, r *http.Request) error {
	v := &sluice.ValidationError{}
	p := pageParams(r, v)
	if err := v.Err(); err != nil {
		return err
	}
	page, err := a.store.ListEventTypes(r.Context(), tenantFrom(r.Context()).ID, p)
	if err != nil {
		return err
	}
	writePage(w, withOperational(page, p))
	return nil
}

// withOperational puts Sluice's own types after the cursor ahead of the
// tenant's page, keeping the page's limit: their ids sort above the
// tenant's, so the list stays one order a cursor walks.
func withOperational(page sluice.Page[sluice.EventType], p sluice.PageParams) sluice.Page[sluice.EventType] {
	var items []sluice.EventType
	for _, et := range sluice.OperationalEventTypes() {
		if p.After == nil || bytes.Compare(et.ID[:], p.After[:]) < 0 {
			items = append(items, et)
		}
	}
	if len(items) == 0 {
		return page
	}
	items = append(items, page.Items...)
	if len(items) <= p.Limit {
		page.Items = items
		return page
	}
	next := items[p.Limit-1].ID
	return sluice.Page[sluice.EventType]{Items: items[:p.Limit], Next: &next}
}

func (a *API) getEventType(w http.ResponseWriter, r *http.Request) error {
	name, err := pathEventType(r)
	if err != nil {
		return err
	}
	if et, ok := sluice.OperationalEventType(name); ok {
		writeJSON(w, http.StatusOK, et)
		return nil
	}
	et, err := a.store.GetEventType(r.Context(), tenantFrom(r.Context()).ID, name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, et)
	return nil
}

func (a *API) deleteEventType(w http.ResponseWriter, r *http.Request) error {
	name, err := pathEventType(r)
	if err != nil {
		return err
	}
	if err := reservedEventType(name); err != nil {
		return err
	}
	tenantID := tenantFrom(r.Context()).ID
	if err := a.store.DeleteEventType(r.Context(), tenantID, name); err != nil {
		return err
	}
	a.schemas.Forget(tenantID)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/eventschema"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// maxEventTypeBody leaves room for the largest example and schema.
const maxEventTypeBody = control.MaxPayloadBytes + eventschema.MaxSchemaBytes + 8<<10

// eventTypeInput is the body of PUT /v1/event-types/{name}: the whole entry.
type eventTypeInput struct {
	Description *string         `json:"description"`
	Example     json.RawMessage `json:"example"`
	Schema      json.RawMessage `json:"schema"`
	Deprecated  *bool           `json:"deprecated"`
}

func (in eventTypeInput) input() control.EventTypeInput {
	et := control.EventTypeInput{Example: jsonOrNil(in.Example), Schema: jsonOrNil(in.Schema)}
	if in.Description != nil {
		et.Description = *in.Description
	}
	if in.Deprecated != nil {
		et.Deprecated = *in.Deprecated
	}
	return et
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
	if !control.ValidEventTypeName(name) {
		return "", notFoundProblem(fmt.Sprintf("%q is not a valid event type name", name))
	}
	return name, nil
}

// putEventType is PUT /v1/event-types/{name}: 201 when it created the
// entry, 200 when it replaced it.
func (a *API) putEventType(w http.ResponseWriter, r *http.Request) error {
	name, err := pathEventType(r)
	if err != nil {
		return err
	}
	var in eventTypeInput
	if err := decodeJSON(w, r, &in, maxEventTypeBody); err != nil {
		return err
	}
	out, created, err := a.ctl.PutEventType(r.Context(), caller(r), name, in.input())
	if err != nil {
		return err
	}
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
	page, err := a.ctl.EventTypes(r.Context(), caller(r), p)
	if err != nil {
		return err
	}
	writePage(w, page)
	return nil
}

func (a *API) getEventType(w http.ResponseWriter, r *http.Request) error {
	name, err := pathEventType(r)
	if err != nil {
		return err
	}
	et, _, err := a.ctl.EventType(r.Context(), caller(r), name)
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
	if err := a.ctl.DeleteEventType(r.Context(), caller(r), name); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

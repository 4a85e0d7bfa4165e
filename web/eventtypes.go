package web

import (
	"bytes"
	"encoding/json"
	"net/url"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// EventTypesView is the event-type catalogue: the tenant's entries, with
// the form that creates one, and Sluice's own types, which are read-only.
type EventTypesView struct {
	Types       []sluice.EventType
	Older       string
	Operational []sluice.EventType
	Flash       string // the outcome of the last action, if any
	// Form refills the create form; Error says why it was refused.
	Form  EventTypeForm
	Error string
}

// EventTypeForm is the event-type form's fields, as sent or as filled from
// an entry: the example and the schema as JSON text.
type EventTypeForm struct {
	Name        string
	Description string
	Example     string
	Schema      string
	Deprecated  bool
}

// EventTypeView is one entry of the catalogue.
type EventTypeView struct {
	Type sluice.EventType
	// Operational types are Sluice's own: read-only.
	Operational bool
	Flash       string
}

// EventTypeFormView is the page that edits an entry.
type EventTypeFormView struct {
	Type  sluice.EventType
	Form  EventTypeForm
	Error string // why the form was refused
}

// EventTypeFormOf is the form filled from an entry, its JSON indented.
func EventTypeFormOf(et sluice.EventType) EventTypeForm {
	return EventTypeForm{Name: et.Name, Description: et.Description, Deprecated: et.Deprecated,
		Example: prettyJSON(et.Example), Schema: prettyJSON(et.Schema)}
}

// prettyJSON indents JSON text by two spaces; "" for none, and text that
// is not JSON as it is.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// EventTypePath is the page of an entry of the catalogue.
func EventTypePath(name string) string { return "/event-types/" + url.PathEscape(name) }

func editEventTypePath(name string) string   { return EventTypePath(name) + "/edit" }
func deleteEventTypePath(name string) string { return EventTypePath(name) + "/delete" }

package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// The event-type catalogue, a tenant's pages: the list with the form that
// creates an entry, an entry's page, its edit form and its deletion behind
// a confirmation page. Sluice's own types are listed and shown, never
// changed. The rules are the API's (control): a refused entry comes
// back on its form with the reason, a schema over the evaluation budget
// included.

// eventTypeFlashes are the outcomes of event-type actions (?done=).
var eventTypeFlashes = map[string]string{
	"created": "Event type created.",
	"saved":   "Event type saved.",
	"deleted": "Event type deleted. Subscriptions to it and its events stay.",
}

// listEventTypes is GET /event-types.
func (d *Dashboard) listEventTypes(w http.ResponseWriter, r *http.Request) error {
	return d.renderEventTypes(w, r, http.StatusOK, web.EventTypesView{Flash: eventTypeFlashes[r.URL.Query().Get("done")]})
}

func (d *Dashboard) renderEventTypes(w http.ResponseWriter, r *http.Request, status int, v web.EventTypesView) error {
	p, err := pageParams(r)
	if err != nil {
		return err
	}
	page, err := d.ctl.TenantEventTypes(r.Context(), caller(r), p)
	if err != nil {
		return err
	}
	v.Types, v.Older, v.Operational = page.Items, olderURL(r, page.Next), sluice.OperationalEventTypes()
	return d.render(w, r, status, web.EventTypesPage(chrome(r, web.SectionEventTypes), v))
}

// readEventTypeForm reads the event-type form's fields.
func readEventTypeForm(form url.Values) web.EventTypeForm {
	return web.EventTypeForm{
		Name:        strings.TrimSpace(form.Get("name")),
		Description: strings.TrimSpace(form.Get("description")),
		Example:     strings.TrimSpace(form.Get("example")),
		Schema:      strings.TrimSpace(form.Get("schema")),
		Deprecated:  form.Get("deprecated") != "",
	}
}

// eventTypeInput is the form's entry: empty example and schema are none.
func eventTypeInput(f web.EventTypeForm) control.EventTypeInput {
	et := control.EventTypeInput{Description: f.Description, Deprecated: f.Deprecated}
	if f.Example != "" {
		et.Example = json.RawMessage(f.Example)
	}
	if f.Schema != "" {
		et.Schema = json.RawMessage(f.Schema)
	}
	return et
}

// createEventType is POST /event-types: a new entry; a name already in the
// catalogue is refused on the form, never overwritten.
func (d *Dashboard) createEventType(w http.ResponseWriter, r *http.Request) error {
	f := readEventTypeForm(r.PostForm)
	refuse := func(msg string) error {
		return d.renderEventTypes(w, r, http.StatusUnprocessableEntity, web.EventTypesView{Form: f, Error: msg})
	}
	_, err := d.ctl.CreateEventType(r.Context(), caller(r), f.Name, eventTypeInput(f))
	switch {
	case invalid(err):
		return refuse(fieldErrors(err))
	case errors.Is(err, sluice.ErrConflict):
		return refuse("The event type " + f.Name + " exists already: edit it from its page.")
	case err != nil:
		return err
	}
	return redirect(w, r, eventTypeDone(f.Name, "created"))
}

// pathEventType is the entry of the {name} of the path, Sluice's own types
// included (operational); a malformed name is not found, like an unknown
// one.
func (d *Dashboard) pathEventType(r *http.Request) (et sluice.EventType, operational bool, err error) {
	return d.ctl.EventType(r.Context(), caller(r), chi.URLParam(r, "name"))
}

// tenantEventType is pathEventType for a change: Sluice's own types are
// refused.
func (d *Dashboard) tenantEventType(r *http.Request) (sluice.EventType, error) {
	et, operational, err := d.pathEventType(r)
	if err == nil && operational {
		err = errForbidden("Sluice's own event types are read-only.")
	}
	return et, err
}

// showEventType is GET /event-types/{name}.
func (d *Dashboard) showEventType(w http.ResponseWriter, r *http.Request) error {
	et, operational, err := d.pathEventType(r)
	if err != nil {
		return err
	}
	v := web.EventTypeView{Type: et, Operational: operational, Flash: eventTypeFlashes[r.URL.Query().Get("done")]}
	return d.render(w, r, http.StatusOK, web.EventTypePage(chrome(r, web.SectionEventTypes), v))
}

// editEventType is GET /event-types/{name}/edit.
func (d *Dashboard) editEventType(w http.ResponseWriter, r *http.Request) error {
	et, err := d.tenantEventType(r)
	if err != nil {
		return err
	}
	v := web.EventTypeFormView{Type: et, Form: web.EventTypeFormOf(et)}
	return d.render(w, r, http.StatusOK, web.EventTypeFormPage(chrome(r, web.SectionEventTypes), v))
}

// updateEventType is POST /event-types/{name}/edit: replaces the entry;
// its name never changes.
func (d *Dashboard) updateEventType(w http.ResponseWriter, r *http.Request) error {
	old, err := d.tenantEventType(r)
	if err != nil {
		return err
	}
	f := readEventTypeForm(r.PostForm)
	f.Name = old.Name
	_, err = d.ctl.UpdateEventType(r.Context(), caller(r), old.Name, eventTypeInput(f))
	if invalid(err) {
		v := web.EventTypeFormView{Type: old, Form: f, Error: fieldErrors(err)}
		return d.render(w, r, http.StatusUnprocessableEntity, web.EventTypeFormPage(chrome(r, web.SectionEventTypes), v))
	}
	if err != nil {
		return err
	}
	return redirect(w, r, eventTypeDone(old.Name, "saved"))
}

// confirmDeleteEventType is GET /event-types/{name}/delete.
func (d *Dashboard) confirmDeleteEventType(w http.ResponseWriter, r *http.Request) error {
	et, err := d.tenantEventType(r)
	if err != nil {
		return err
	}
	v := web.ConfirmView{Title: "Delete event type", Question: "Delete the event type " + et.Name + "?",
		Detail: "It leaves the catalogue with its description, example and schema: events of the type are no longer validated. " +
			"Subscriptions to it, and its events, stay.",
		Button: "Delete event type", Danger: true, Action: r.URL.Path, Back: web.EventTypePath(et.Name)}
	return d.render(w, r, http.StatusOK, web.ConfirmPage(chrome(r, web.SectionEventTypes), v))
}

// deleteEventType is POST /event-types/{name}/delete, once confirmed.
func (d *Dashboard) deleteEventType(w http.ResponseWriter, r *http.Request) error {
	et, err := d.tenantEventType(r)
	if err != nil {
		return err
	}
	if r.PostForm.Get("confirm") != "yes" {
		return redirect(w, r, r.URL.Path)
	}
	if err := d.ctl.DeleteEventType(r.Context(), caller(r), et.Name); err != nil {
		return err
	}
	return redirect(w, r, "/event-types?done=deleted")
}

// eventTypeDone is an entry's page flashing the outcome of an action.
func eventTypeDone(name, done string) string {
	return withQuery(web.EventTypePath(name), url.Values{"done": {done}})
}

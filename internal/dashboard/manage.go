package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// Endpoint management: create, edit (with the subscription), disable and
// enable, delete, reveal and rotate the secret, send a test event, close
// the circuit, lift the throttle. Every action is the control layer's, in the session's
// scope, and the destructive ones (delete, rotate) go through a
// confirmation page first.

// flashes are the outcomes of actions, shown once by the page an action
// redirects to (?done=).
var flashes = map[string]string{
	"created":  "Endpoint created.",
	"saved":    "Endpoint saved.",
	"deleted":  "Endpoint deleted.",
	"disabled": "Endpoint disabled: nothing is sent to it until it is enabled.",
	"enabled":  "Endpoint enabled.",
	"closed":   "Circuit closed: its queued deliveries are sent at its rate limit.",
	"lifted":   "Throttle lifted: its queued deliveries are sent at its rate limit.",
	"verify":   "Challenge sent: the endpoint is verified once its receiver answers it.",
}

func doneFlash(r *http.Request) string { return flashes[r.URL.Query().Get("done")] }

// newEndpoint is GET /endpoints/new: the empty endpoint form.
func (d *Dashboard) newEndpoint(w http.ResponseWriter, r *http.Request) error {
	return d.renderEndpointForm(w, r, http.StatusOK, nil, web.EndpointForm{MaxInFlight: "10", Types: map[string]bool{}}, "")
}

// createEndpoint is POST /endpoints: a new endpoint of the scope (a portal
// session's belongs to its consumer) with its subscription; or, with
// action=test-filter, the form again with its filter tried (testFilter).
func (d *Dashboard) createEndpoint(w http.ResponseWriter, r *http.Request) error {
	form := readEndpointForm(r.PostForm)
	if r.PostForm.Get("action") == actionTestFilter {
		return d.testFilter(w, r, nil, form)
	}
	who := caller(r)
	in, err := formInput(form, true, who.Consumer == nil)
	if err == nil {
		var ep control.EndpointSecret
		if ep, err = d.ctl.CreateEndpoint(r.Context(), who, in); err == nil {
			return redirect(w, r, endpointDone(ep.Endpoint.ID, "created"))
		}
	}
	return d.formRefused(w, r, nil, form, err)
}

// editEndpoint is GET /endpoints/{id}/edit: the form filled with the
// endpoint's settings and subscription.
func (d *Dashboard) editEndpoint(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	ep, err := d.ctl.Endpoint(r.Context(), caller(r), id)
	if err != nil {
		return err
	}
	patterns, filters, err := d.ctl.SubscribedTo(r.Context(), caller(r), id)
	if err != nil {
		return err
	}
	catalogue, err := d.ctl.Catalogue(r.Context(), caller(r))
	if err != nil {
		return err
	}
	v := web.EndpointFormView{Endpoint: &ep, Form: endpointForm(ep, patterns, filters, catalogue), FilterNote: filterNote(filters)}
	return d.renderEndpointFormView(w, r, http.StatusOK, v)
}

// updateEndpoint is POST /endpoints/{id}/edit: saves the form. Headers,
// which the form does not show, are kept.
func (d *Dashboard) updateEndpoint(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	who := caller(r)
	ep, err := d.ctl.Endpoint(r.Context(), who, id)
	if err != nil {
		return err
	}
	form := readEndpointForm(r.PostForm)
	if r.PostForm.Get("action") == actionTestFilter {
		return d.testFilter(w, r, &ep, form)
	}
	in, err := formInput(form, false, who.Consumer == nil)
	if err == nil {
		if _, err = d.ctl.UpdateEndpoint(r.Context(), who, id, in); err == nil {
			return redirect(w, r, endpointDone(id, "saved"))
		}
	}
	return d.formRefused(w, r, &ep, form, err)
}

// formRefused answers a refused endpoint form with the form again, saying
// why (422), a refused filter's place in words ("filter at total.$gt");
// any other error goes to the error page.
func (d *Dashboard) formRefused(w http.ResponseWriter, r *http.Request, ep *sluice.Endpoint, form web.EndpointForm, err error) error {
	var v *sluice.ValidationError
	if !errors.As(err, &v) {
		return err
	}
	shown := &sluice.ValidationError{Fields: make([]sluice.FieldError, len(v.Fields))}
	for i, f := range v.Fields {
		if place, ok := strings.CutPrefix(f.Field, "filter."); ok {
			f = sluice.FieldError{Field: "filter", Message: "at " + place + " " + f.Message}
		}
		shown.Fields[i] = f
	}
	return d.renderEndpointForm(w, r, http.StatusUnprocessableEntity, ep, form, fieldErrors(shown))
}

func (d *Dashboard) renderEndpointForm(w http.ResponseWriter, r *http.Request, status int, ep *sluice.Endpoint, form web.EndpointForm, msg string) error {
	return d.renderEndpointFormView(w, r, status, web.EndpointFormView{Endpoint: ep, Form: form, Error: msg})
}

// renderEndpointFormView renders the endpoint form v, with the scope's
// catalogue.
func (d *Dashboard) renderEndpointFormView(w http.ResponseWriter, r *http.Request, status int, v web.EndpointFormView) error {
	catalogue, err := d.ctl.Catalogue(r.Context(), caller(r))
	if err != nil {
		return err
	}
	v.Catalogue, v.Free = catalogue, caller(r).Consumer == nil
	return d.render(w, r, status, web.EndpointFormPage(chrome(r, web.SectionEndpoints), v))
}

// actionTestFilter is the endpoint form's "Test the filter" button: the
// form comes back as sent, nothing saved, with the filter's answer on the
// pasted payload or the ticked event types' examples.
const actionTestFilter = "test-filter"

func (d *Dashboard) testFilter(w http.ResponseWriter, r *http.Request, ep *sluice.Endpoint, form web.EndpointForm) error {
	catalogue, err := d.ctl.Catalogue(r.Context(), caller(r))
	if err != nil {
		return err
	}
	tests, note := filterTests(form, catalogue)
	return d.renderEndpointFormView(w, r, http.StatusOK, web.EndpointFormView{Endpoint: ep, Form: form, FilterTests: tests, FilterNote: note})
}

// setDisabled is POST /endpoints/{id}/disable with disabled=1 or 0.
func (d *Dashboard) setDisabled(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	disabled := r.PostForm.Get("disabled") != "0"
	if _, err := d.ctl.UpdateEndpoint(r.Context(), caller(r), id, control.EndpointInput{Disabled: &disabled}); err != nil {
		return err
	}
	done := "enabled"
	if disabled {
		done = "disabled"
	}
	return redirect(w, r, endpointDone(id, done))
}

// confirmDeleteEndpoint is GET /endpoints/{id}/delete: what deleting does.
func (d *Dashboard) confirmDeleteEndpoint(w http.ResponseWriter, r *http.Request) error {
	return d.confirmEndpointAction(w, r, func(ep sluice.Endpoint) web.ConfirmView {
		return web.ConfirmView{Title: "Delete endpoint", Question: "Delete " + ep.URL + "?",
			Detail: "The endpoint goes with its subscriptions and every delivery to it, queued or past. This cannot be undone.",
			Button: "Delete endpoint", Danger: true}
	})
}

// confirmEndpointAction shows the confirmation page view makes for the
// endpoint of the path, posting back to the same path.
func (d *Dashboard) confirmEndpointAction(w http.ResponseWriter, r *http.Request, view func(sluice.Endpoint) web.ConfirmView) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	ep, err := d.ctl.Endpoint(r.Context(), caller(r), id)
	if err != nil {
		return err
	}
	v := view(ep)
	v.Action, v.Back = r.URL.Path, "/endpoints/"+id.String()
	return d.render(w, r, http.StatusOK, web.ConfirmPage(chrome(r, web.SectionEndpoints), v))
}

// deleteEndpoint is POST /endpoints/{id}/delete: once confirmed, deletes
// the endpoint; unconfirmed, it shows the confirmation page.
func (d *Dashboard) deleteEndpoint(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if r.PostForm.Get("confirm") != "yes" {
		return redirect(w, r, r.URL.Path)
	}
	if err := d.ctl.DeleteEndpoint(r.Context(), caller(r), id); err != nil {
		return err
	}
	return redirect(w, r, "/?done=deleted")
}

// revealSecret is POST /endpoints/{id}/secret: shows the signing secret in
// the answer (a POST, so it lands in no URL or history).
func (d *Dashboard) revealSecret(w http.ResponseWriter, r *http.Request) error {
	return d.showSecret(w, r, false)
}

// confirmRotateSecret is GET /endpoints/{id}/secret/rotate.
func (d *Dashboard) confirmRotateSecret(w http.ResponseWriter, r *http.Request) error {
	return d.confirmEndpointAction(w, r, func(ep sluice.Endpoint) web.ConfirmView {
		return web.ConfirmView{Title: "Rotate secret", Question: "Rotate the signing secret of " + ep.URL + "?",
			Detail: "A new secret signs every message from now on. The current one keeps signing beside it for " +
				control.SecretGrace.String() + ", so receivers can switch to the new one without losing a message.",
			Button: "Rotate secret"}
	})
}

// rotateSecret is POST /endpoints/{id}/secret/rotate: once confirmed,
// makes a new secret and shows it.
func (d *Dashboard) rotateSecret(w http.ResponseWriter, r *http.Request) error {
	if r.PostForm.Get("confirm") != "yes" {
		return redirect(w, r, r.URL.Path)
	}
	return d.showSecret(w, r, true)
}

func (d *Dashboard) showSecret(w http.ResponseWriter, r *http.Request, rotate bool) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var s control.EndpointSecret
	if rotate {
		s, err = d.ctl.RotateEndpointSecret(r.Context(), caller(r), id)
	} else {
		s, err = d.ctl.RevealEndpointSecret(r.Context(), caller(r), id)
	}
	if err != nil {
		return err
	}
	v := web.SecretView{Endpoint: s.Endpoint, Rotated: rotate, Secret: s.Secret, PollURL: s.PollURL, PublicKey: s.PublicKey}
	return d.render(w, r, http.StatusOK, web.SecretPage(chrome(r, web.SectionEndpoints), v))
}

// testEndpoint is POST /endpoints/{id}/test: sends a sluice.test event to
// the endpoint alone and shows the event with its delivery.
func (d *Dashboard) testEndpoint(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	ev, err := d.ctl.TestEndpoint(r.Context(), caller(r), id)
	if err != nil {
		return err
	}
	return redirect(w, r, "/events/"+ev.ID.String())
}

// closeCircuit is POST /endpoints/{id}/circuit/close.
func (d *Dashboard) closeCircuit(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if _, err := d.ctl.CloseCircuit(r.Context(), caller(r), id); err != nil {
		return err
	}
	return redirect(w, r, endpointDone(id, "closed"))
}

// liftThrottle is POST /endpoints/{id}/throttle/lift.
func (d *Dashboard) liftThrottle(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if _, err := d.ctl.LiftThrottle(r.Context(), caller(r), id); err != nil {
		return err
	}
	return redirect(w, r, endpointDone(id, "lifted"))
}

// verifyEndpoint is POST /endpoints/{id}/verify: a new challenge.
func (d *Dashboard) verifyEndpoint(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if _, err := d.ctl.VerifyEndpoint(r.Context(), caller(r), id); err != nil {
		return err
	}
	return redirect(w, r, endpointDone(id, "verify"))
}

// endpointDone is an endpoint's page flashing the outcome of an action.
func endpointDone(id uuid.UUID, done string) string {
	return withQuery("/endpoints/"+id.String(), url.Values{"done": {done}})
}

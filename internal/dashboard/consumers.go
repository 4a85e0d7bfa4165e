package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// Consumers, a tenant's pages: the list with the form that creates one,
// a consumer's page with its portal links, its edit form, and deletion
// and revocation of its portal links behind confirmation pages. The rules
// are the API's (control).

// consumerFlashes are the outcomes of consumer actions (?done=).
var consumerFlashes = map[string]string{
	"created": "Consumer created.",
	"saved":   "Consumer saved.",
	"deleted": "Consumer deleted, with its endpoints.",
	"revoked": "Every portal link of this consumer has stopped working, and its portal sessions have ended.",
}

// listConsumers is GET /consumers: the tenant's consumers, each leading
// to the consumer's view, and the form that creates one.
func (d *Dashboard) listConsumers(w http.ResponseWriter, r *http.Request) error {
	return d.renderConsumers(w, r, http.StatusOK, web.ConsumersView{Flash: consumerFlashes[r.URL.Query().Get("done")]})
}

func (d *Dashboard) renderConsumers(w http.ResponseWriter, r *http.Request, status int, v web.ConsumersView) error {
	p, err := pageParams(r)
	if err != nil {
		return err
	}
	page, err := d.ctl.Consumers(r.Context(), caller(r), p)
	if err != nil {
		return err
	}
	v.Consumers, v.Older = page.Items, olderURL(r, page.Next)
	return d.render(w, r, status, web.ConsumersPage(chrome(r, web.SectionConsumers), v))
}

// readConsumerForm reads the consumer form's fields.
func readConsumerForm(form url.Values) web.ConsumerForm {
	return web.ConsumerForm{
		UID:        strings.TrimSpace(form.Get("uid")),
		Name:       strings.TrimSpace(form.Get("name")),
		AlertEmail: strings.TrimSpace(form.Get("alert_email")),
	}
}

// consumerInput is the form's name and alert email: an empty address is
// none (the tenant's).
func consumerInput(f web.ConsumerForm) control.ConsumerInput {
	var email *string
	if f.AlertEmail != "" {
		email = &f.AlertEmail
	}
	return control.ConsumerInput{Name: f.Name, AlertEmail: email}
}

// createConsumer is POST /consumers: a new consumer; a uid already taken
// is refused on the form, never overwritten.
func (d *Dashboard) createConsumer(w http.ResponseWriter, r *http.Request) error {
	f := readConsumerForm(r.PostForm)
	refuse := func(msg string) error {
		return d.renderConsumers(w, r, http.StatusUnprocessableEntity, web.ConsumersView{Form: f, Error: msg})
	}
	_, err := d.ctl.CreateConsumer(r.Context(), caller(r), f.UID, consumerInput(f))
	switch {
	case invalid(err):
		return refuse(fieldErrors(err))
	case errors.Is(err, sluice.ErrConflict):
		return refuse("A consumer with the UID " + f.UID + " exists already.")
	case err != nil:
		return err
	}
	return redirect(w, r, consumerDone(f.UID, "created"))
}

// pathConsumer is the consumer of the {uid} of the path; a malformed uid
// is not found, like an unknown one.
func (d *Dashboard) pathConsumer(r *http.Request) (sluice.Consumer, error) {
	return d.ctl.Consumer(r.Context(), caller(r), chi.URLParam(r, "uid"))
}

// showConsumer is GET /consumers/{uid}: one consumer, its portal links and
// its endpoints, which lead to the same endpoint pages its portal shows.
func (d *Dashboard) showConsumer(w http.ResponseWriter, r *http.Request) error {
	return d.renderConsumer(w, r, web.ConsumerView{Flash: consumerFlashes[r.URL.Query().Get("done")]})
}

func (d *Dashboard) renderConsumer(w http.ResponseWriter, r *http.Request, v web.ConsumerView) error {
	c, err := d.pathConsumer(r)
	if err != nil {
		return err
	}
	p, err := pageParams(r)
	if err != nil {
		return err
	}
	page, err := d.ctl.Endpoints(r.Context(), caller(r), &c.UID, p)
	if err != nil {
		return err
	}
	v.Consumer, v.Endpoints, v.Older = c, page.Items, olderURL(r, page.Next)
	return d.render(w, r, http.StatusOK, web.ConsumerPage(chrome(r, web.SectionConsumers), v))
}

// editConsumer is GET /consumers/{uid}/edit.
func (d *Dashboard) editConsumer(w http.ResponseWriter, r *http.Request) error {
	c, err := d.pathConsumer(r)
	if err != nil {
		return err
	}
	f := web.ConsumerForm{UID: c.UID, Name: c.Name}
	if c.AlertEmail != nil {
		f.AlertEmail = *c.AlertEmail
	}
	return d.render(w, r, http.StatusOK, web.ConsumerFormPage(chrome(r, web.SectionConsumers), web.ConsumerFormView{Consumer: c, Form: f}))
}

// updateConsumer is POST /consumers/{uid}/edit: saves its name and alert
// email; its uid never changes.
func (d *Dashboard) updateConsumer(w http.ResponseWriter, r *http.Request) error {
	c, err := d.pathConsumer(r)
	if err != nil {
		return err
	}
	f := readConsumerForm(r.PostForm)
	f.UID = c.UID
	_, err = d.ctl.UpdateConsumer(r.Context(), caller(r), c.UID, consumerInput(f))
	if invalid(err) {
		v := web.ConsumerFormView{Consumer: c, Form: f, Error: fieldErrors(err)}
		return d.render(w, r, http.StatusUnprocessableEntity, web.ConsumerFormPage(chrome(r, web.SectionConsumers), v))
	}
	if err != nil {
		return err
	}
	return redirect(w, r, consumerDone(c.UID, "saved"))
}

// confirmDeleteConsumer is GET /consumers/{uid}/delete: what deleting does.
func (d *Dashboard) confirmDeleteConsumer(w http.ResponseWriter, r *http.Request) error {
	c, err := d.pathConsumer(r)
	if err != nil {
		return err
	}
	v := web.ConfirmView{Title: "Delete consumer", Question: "Delete the consumer " + c.UID + "?",
		Detail: "It goes with " + plural(c.EndpointCount, "endpoint", "endpoints") + " of its own, their subscriptions and every delivery to them, " +
			"and its portal links stop working. Events addressed to it stay. This cannot be undone.",
		Button: "Delete consumer", Danger: true, Action: r.URL.Path, Back: web.ConsumerPath(c.UID)}
	return d.render(w, r, http.StatusOK, web.ConfirmPage(chrome(r, web.SectionConsumers), v))
}

// deleteConsumer is POST /consumers/{uid}/delete: once confirmed, deletes
// the consumer; unconfirmed, it shows the confirmation page.
func (d *Dashboard) deleteConsumer(w http.ResponseWriter, r *http.Request) error {
	c, err := d.pathConsumer(r)
	if err != nil {
		return err
	}
	if r.PostForm.Get("confirm") != "yes" {
		return redirect(w, r, r.URL.Path)
	}
	if err := d.ctl.DeleteConsumer(r.Context(), caller(r), c.UID); err != nil {
		return err
	}
	return redirect(w, r, "/consumers?done=deleted")
}

// issuePortalLink is POST /consumers/{uid}/portal: signs a portal link of
// one of the form's lifetimes and shows it, this once, in the answer itself
// (never in a URL).
func (d *Dashboard) issuePortalLink(w http.ResponseWriter, r *http.Request) error {
	c, err := d.pathConsumer(r)
	if err != nil {
		return err
	}
	in := control.PortalLinkInput{ReadOnly: r.PostForm.Get("read_only") != ""}
	if raw := r.PostForm.Get("ttl"); raw != "" {
		secs, err := strconv.ParseInt(raw, 10, 64)
		i := slices.IndexFunc(web.PortalTTLs, func(o web.PortalTTL) bool { return o.TTL == time.Duration(secs)*time.Second })
		if err != nil || i < 0 {
			return errBadRequest("Choose how long the link is valid from the list.")
		}
		in.TTLSeconds = &secs
	}
	link, err := d.ctl.CreatePortalLink(r.Context(), caller(r), c.UID, in)
	if err != nil {
		return err
	}
	return d.renderConsumer(w, r, web.ConsumerView{Link: &link, LinkReadOnly: in.ReadOnly})
}

// confirmRevokePortal is GET /consumers/{uid}/portal/revoke.
func (d *Dashboard) confirmRevokePortal(w http.ResponseWriter, r *http.Request) error {
	c, err := d.pathConsumer(r)
	if err != nil {
		return err
	}
	v := web.ConfirmView{Title: "Revoke portal links", Question: "Revoke every portal link of " + c.UID + "?",
		Detail: "Every portal link issued for this consumer stops working at once, and everyone signed in with one is signed out. " +
			"Its endpoints are not touched. New links can be issued afterwards.",
		Button: "Revoke all portal links", Danger: true, Action: r.URL.Path, Back: web.ConsumerPath(c.UID)}
	return d.render(w, r, http.StatusOK, web.ConfirmPage(chrome(r, web.SectionConsumers), v))
}

// revokePortal is POST /consumers/{uid}/portal/revoke, once confirmed.
func (d *Dashboard) revokePortal(w http.ResponseWriter, r *http.Request) error {
	c, err := d.pathConsumer(r)
	if err != nil {
		return err
	}
	if r.PostForm.Get("confirm") != "yes" {
		return redirect(w, r, r.URL.Path)
	}
	if err := d.ctl.RevokePortal(r.Context(), caller(r), c.UID); err != nil {
		return err
	}
	return redirect(w, r, consumerDone(c.UID, "revoked"))
}

// consumerDone is a consumer's page flashing the outcome of an action.
func consumerDone(uid, done string) string {
	return withQuery(web.ConsumerPath(uid), url.Values{"done": {done}})
}

// plural is "1 thing" or "n things".
func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(n, 10) + " " + many
}

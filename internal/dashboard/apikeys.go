package dashboard

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// listAPIKeys is GET /api-keys: the tenant's keys, never the keys
// themselves, and the form that creates one.
func (d *Dashboard) listAPIKeys(w http.ResponseWriter, r *http.Request) error {
	return d.renderAPIKeys(w, r, http.StatusOK, web.APIKeysView{Revoked: r.URL.Query().Get("revoked") != ""})
}

// renderAPIKeys fills v with a page of keys and renders it.
func (d *Dashboard) renderAPIKeys(w http.ResponseWriter, r *http.Request, status int, v web.APIKeysView) error {
	p, err := pageParams(r)
	if err != nil {
		return err
	}
	page, err := d.ctl.APIKeys(r.Context(), caller(r), p)
	if err != nil {
		return err
	}
	s, _ := sessionFromContext(r.Context())
	v.Keys, v.Older, v.Current, v.Now = page.Items, olderURL(r, page.Next), s.apiKeyID, time.Now()
	return d.render(w, r, status, web.APIKeysPage(chrome(r, web.SectionAPIKeys), v))
}

// createAPIKey is POST /api-keys: makes a key and shows it, this once, in
// the answer itself (never in a URL).
func (d *Dashboard) createAPIKey(w http.ResponseWriter, r *http.Request) error {
	now := time.Now()
	p := sluice.NewAPIKeyParams{Name: strings.TrimSpace(r.PostForm.Get("name"))}
	if raw := r.PostForm.Get("expires"); raw != "" {
		days, err := strconv.Atoi(raw)
		if err != nil || !slices.Contains(web.APIKeyExpiryDays, days) {
			return errBadRequest("Choose an expiry from the list.")
		}
		t := now.Add(time.Duration(days) * 24 * time.Hour)
		p.ExpiresAt = &t
	}
	key, err := d.ctl.CreateAPIKey(r.Context(), caller(r), p)
	if invalid(err) {
		return d.renderAPIKeys(w, r, http.StatusUnprocessableEntity, web.APIKeysView{Error: fieldErrors(err), Name: p.Name})
	}
	if err != nil {
		return err
	}
	return d.renderAPIKeys(w, r, http.StatusOK, web.APIKeysView{Created: &key})
}

// fieldErrors phrases a validation error for a form: "Name is required."
func fieldErrors(err error) string {
	var v *sluice.ValidationError
	if !errors.As(err, &v) {
		return err.Error()
	}
	msgs := make([]string, len(v.Fields))
	for i, f := range v.Fields {
		name := strings.ToUpper(f.Field[:1]) + strings.ReplaceAll(f.Field[1:], "_", " ")
		if f.Field == "uid" {
			name = "UID"
		}
		msgs[i] = name + " " + f.Message + "."
	}
	return strings.Join(msgs, " ")
}

// invalid reports whether err is the refusal of a form's input
// (*sluice.ValidationError), which the form shows again with the reason.
func invalid(err error) bool {
	var v *sluice.ValidationError
	return errors.As(err, &v)
}

// confirmRevokeAPIKey is GET /api-keys/{id}/revoke: what revoking the key
// does, and the form that does it.
func (d *Dashboard) confirmRevokeAPIKey(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	key, err := d.ctl.APIKey(r.Context(), caller(r), id)
	if err != nil {
		return err
	}
	s, _ := sessionFromContext(r.Context())
	v := web.RevokeAPIKeyView{Key: key, Current: key.ID == s.apiKeyID}
	return d.render(w, r, http.StatusOK, web.RevokeAPIKeyPage(chrome(r, web.SectionAPIKeys), v))
}

// revokeAPIKey is POST /api-keys/{id}/revoke, the confirmed revocation. The
// key's sessions end with it: revoking the session's own key signs out.
func (d *Dashboard) revokeAPIKey(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := d.ctl.RevokeAPIKey(r.Context(), caller(r), id); err != nil {
		return err
	}
	if s, _ := sessionFromContext(r.Context()); s.apiKeyID == id {
		d.clearSessionCookie(w, r)
		return redirect(w, r, "/login")
	}
	return redirect(w, r, "/api-keys?revoked=1")
}

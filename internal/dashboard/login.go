package dashboard

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// loginForm is GET /login: the sign-in form, or straight on for someone
// already signed in.
func (d *Dashboard) loginForm(w http.ResponseWriter, r *http.Request) error {
	next := safeNext(r.URL.Query().Get("next"))
	if _, ok := d.sessionFrom(r); ok {
		return redirect(w, r, next)
	}
	if next == "/" {
		next = ""
	}
	return d.render(w, r, http.StatusOK, web.LoginPage("", next))
}

// login is POST /login: checks the API key and starts a session. A wrong
// key is a failed authentication of the client's address, which is
// answered 429 once it has failed too often, before its key is looked up;
// a sign-in costs its tenant a token, as an API request does
// (ratelimit.go).
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) error {
	if err := d.checkAuth(r); err != nil {
		return err
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		return errBadRequest("The form could not be read.")
	}
	key := strings.TrimSpace(r.PostForm.Get("api_key"))
	next := safeNext(r.PostForm.Get("next"))
	formNext := next
	if formNext == "/" {
		formNext = ""
	}
	if key == "" {
		d.failAuth(r)
		return d.render(w, r, http.StatusBadRequest, web.LoginPage("Enter an API key.", formNext))
	}
	cred, err := d.store.AuthenticateAPIKey(r.Context(), key)
	if errors.Is(err, sluice.ErrNotFound) {
		d.failAuth(r)
		return d.render(w, r, http.StatusUnauthorized, web.LoginPage("That API key is not valid.", formNext))
	}
	if err != nil {
		return err
	}
	if cred.Tenant.Disabled() {
		return d.render(w, r, http.StatusForbidden, web.LoginPage("This account is disabled. Ask the operator of this Sluice to enable it.", formNext))
	}
	if err := d.limitTenant(r, cred.Tenant.ID, 1); err != nil {
		return err
	}
	token := newSessionToken()
	expires := time.Now().Add(SessionTTL)
	err = d.store.CreateDashboardSession(r.Context(), tokenHash(token), cred.Tenant.ID, cred.APIKeyID, expires)
	if errors.Is(err, sluice.ErrNotFound) { // the key was revoked meanwhile
		return d.render(w, r, http.StatusUnauthorized, web.LoginPage("That API key is not valid.", formNext))
	}
	if err != nil {
		return err
	}
	d.setSessionCookie(w, r, token, expires)
	return redirect(w, r, next)
}

// logout is POST /logout: ends the session on the server, so the cookie is
// worthless even if a copy of it survives. A signed-in request must carry
// its CSRF token, so no other site can sign anyone out.
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) error {
	s, err := d.loadSession(r)
	switch {
	case err == nil:
		if err := d.checkCSRF(w, r, s); err != nil {
			return err
		}
		if err := d.store.DeleteDashboardSession(r.Context(), tokenHash(s.cookie)); err != nil {
			return err
		}
	case !errors.Is(err, errNoSession):
		return err // the session could not be ended: say so rather than drop the cookie
	}
	d.clearSessionCookie(w, r)
	return redirect(w, r, "/login")
}

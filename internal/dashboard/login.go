package dashboard

import (
	"errors"
	"net/http"
	"strings"

	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/control"
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
	v := web.LoginView{Next: next}
	if r.URL.Query().Get("password_set") != "" {
		v.Notice = "Your password is set. Sign in with it."
	}
	return d.render(w, r, http.StatusOK, web.LoginPage(v))
}

// login is POST /login: checks a member's email and password, or an API
// key, and starts a session. A wrong credential is a failed authentication
// of the client's address. Once the address has failed too often, a
// password sign-in is answered 429 unchecked, and an API key is looked up
// only as the API would (gateAuth): a valid key still signs in. A sign-in
// costs its tenant a token, as an API request does (ratelimit.go).
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		return errBadRequest("The form could not be read.")
	}
	key := strings.TrimSpace(r.PostForm.Get("api_key"))
	email := strings.TrimSpace(r.PostForm.Get("email"))
	next := safeNext(r.PostForm.Get("next"))
	v := web.LoginView{Next: next, Email: email}
	if v.Next == "/" {
		v.Next = ""
	}
	refuse := func(status int, msg string) error {
		v.Error = msg
		return d.render(w, r, status, web.LoginPage(v))
	}
	if key == "" {
		if err := d.checkAuth(r); err != nil {
			return err
		}
		if email == "" {
			d.failAuth(r)
			return refuse(http.StatusBadRequest, "Enter your email and password, or an API key.")
		}
		return d.memberLogin(w, r, email, r.PostForm.Get("password"), next, refuse)
	}
	credential := key
	if !apikey.WellFormed(key) {
		credential = "" // nothing to look up past the limit
	}
	gate, err := d.gateAuth(r, credential)
	if err != nil {
		return err
	}
	cred, err := d.ctl.Authenticate(r.Context(), key)
	if errors.Is(err, sluice.ErrNotFound) {
		if err := d.failGated(r, gate); err != nil {
			return err
		}
		return refuse(http.StatusUnauthorized, "That API key is not valid.")
	}
	if err != nil {
		return err
	}
	d.limits.Verified(key)
	if cred.Tenant.Disabled() {
		return refuse(http.StatusForbidden, "This account is disabled. Ask the operator of this Sluice to enable it.")
	}
	if err := d.limitTenant(r, cred.Tenant.ID, 1); err != nil {
		return err
	}
	ns, err := d.ctl.OpenKeySession(r.Context(), cred)
	if errors.Is(err, sluice.ErrNotFound) { // the key was revoked meanwhile
		return refuse(http.StatusUnauthorized, "That API key is not valid.")
	}
	if err != nil {
		return err
	}
	d.setSessionCookie(w, r, ns.Token, ns.ExpiresAt)
	return redirect(w, r, next)
}

// memberLogin is login with a member's email and password. An unknown
// email costs a password hash as a wrong password does (control.SignIn),
// and both answer the same, so the form does not tell which emails have
// accounts.
func (d *Dashboard) memberLogin(w http.ResponseWriter, r *http.Request, email, password, next string, refuse func(int, string) error) error {
	c, err := d.ctl.SignIn(r.Context(), email, password)
	if errors.Is(err, control.ErrBadPassword) {
		d.failAuth(r)
		return refuse(http.StatusUnauthorized, "That email and password do not match.")
	}
	if err != nil {
		return err
	}
	if c.Tenant.Disabled() {
		return refuse(http.StatusForbidden, "This account is disabled. Ask the operator of this Sluice to enable it.")
	}
	if err := d.limitTenant(r, c.Tenant.ID, 1); err != nil {
		return err
	}
	ns, err := d.ctl.OpenMemberSession(r.Context(), c)
	if errors.Is(err, sluice.ErrNotFound) { // removed meanwhile
		return refuse(http.StatusUnauthorized, "That email and password do not match.")
	}
	if err != nil {
		return err
	}
	d.setSessionCookie(w, r, ns.Token, ns.ExpiresAt)
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
		if err := d.ctl.EndSession(r.Context(), s.cookie); err != nil {
			return err
		}
	case !errors.Is(err, errNoSession):
		return err // the session could not be ended: say so rather than drop the cookie
	}
	d.clearSessionCookie(w, r)
	return redirect(w, r, "/login")
}

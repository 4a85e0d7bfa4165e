package dashboard

import (
	"errors"
	"net/http"
	"strings"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/member"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// A member sets its password from a link emailed to it (notify's
// MemberMailWorker): an invitation, or a reset asked for at /forgot. The
// link's token works once, within member.TokenTTL of the dashboard's clock
// (Config.Now). A token that is malformed, unknown, used or expired is a
// failed authentication of the client's address, as a wrong password is;
// but the failures are limited, not the address: past the address's limit
// a token is still looked up as gateAuth allows (ratelimit.go), and a
// valid one is served.

// errInvalidPasswordLink answers a link that does not work (any more).
func errInvalidPasswordLink() *pageError {
	return &pageError{status: http.StatusForbidden, title: "Link not valid",
		detail: "This link is not valid: it was used already, has expired (links work for 24 hours), or was copied incompletely. " +
			"Ask for a new one with \"Forgot your password?\" on the sign-in page."}
}

// passwordMember is the member whose password the token sets, or the
// error page of a token that does not work.
func (d *Dashboard) passwordMember(r *http.Request, token string) (web.PasswordView, error) {
	gate, err := d.gateAuth(r, token)
	if err != nil {
		return web.PasswordView{}, err
	}
	m, err := d.ctl.PasswordLink(r.Context(), token)
	if errors.Is(err, sluice.ErrNotFound) {
		if err := d.failGated(r, gate); err != nil {
			return web.PasswordView{}, err
		}
		return web.PasswordView{}, errInvalidPasswordLink()
	}
	if err != nil {
		return web.PasswordView{}, err
	}
	d.limits.Verified(token)
	return web.PasswordView{Token: token, Email: m.Email, Invite: m.Purpose == member.PurposeInvite}, nil
}

// passwordForm is GET /password?token=…, where an emailed link leads: the
// form that sets the password. Showing it does not use the token.
func (d *Dashboard) passwordForm(w http.ResponseWriter, r *http.Request) error {
	v, err := d.passwordMember(r, r.URL.Query().Get("token"))
	if err != nil {
		return err
	}
	return d.render(w, r, http.StatusOK, web.PasswordPage(v))
}

// setPassword is POST /password: uses the token to set the password, which
// ends the member's other sessions, and leads to the sign-in form.
func (d *Dashboard) setPassword(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		return errBadRequest("The form could not be read.")
	}
	v, err := d.passwordMember(r, r.PostForm.Get("token"))
	if err != nil {
		return err
	}
	password := r.PostForm.Get("password")
	if password != r.PostForm.Get("confirm") {
		v.Error = "The two passwords differ."
		return d.render(w, r, http.StatusUnprocessableEntity, web.PasswordPage(v))
	}
	_, err = d.ctl.SetPassword(r.Context(), v.Token, password)
	if invalid(err) {
		v.Error = fieldErrors(err)
		return d.render(w, r, http.StatusUnprocessableEntity, web.PasswordPage(v))
	}
	if errors.Is(err, sluice.ErrNotFound) { // used by another request meanwhile
		d.failAuth(r)
		return errInvalidPasswordLink()
	}
	if err != nil {
		return err
	}
	return redirect(w, r, "/login?password_set=1")
}

// forgotForm is GET /forgot: the form that emails a reset link.
func (d *Dashboard) forgotForm(w http.ResponseWriter, r *http.Request) error {
	return d.render(w, r, http.StatusOK, web.ForgotPage(web.ForgotView{}))
}

// forgot is POST /forgot: queues the email of a reset link to the member
// with the email given, if any, and answers the same either way. Each
// request costs the client's address a token of its failed
// authentications, so no address can flood a mailbox.
func (d *Dashboard) forgot(w http.ResponseWriter, r *http.Request) error {
	if err := d.checkAuth(r); err != nil {
		return err
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		return errBadRequest("The form could not be read.")
	}
	email := strings.TrimSpace(r.PostForm.Get("email"))
	if email == "" || len(email) > control.MaxEmailLength {
		return d.render(w, r, http.StatusUnprocessableEntity, web.ForgotPage(web.ForgotView{Error: "Enter your email."}))
	}
	d.failAuth(r)
	err := d.ctl.RequestPasswordReset(r.Context(), email)
	if errors.Is(err, sluice.ErrMailNotConfigured) {
		return d.render(w, r, http.StatusConflict, web.ForgotPage(web.ForgotView{
			Error: "Email is not configured on this server (SLUICE_SMTP_URL is not set), so no reset link can be sent. " +
				"Ask an owner of your account, or the server's operator, for help.",
		}))
	}
	if err != nil {
		return err
	}
	return d.render(w, r, http.StatusOK, web.ForgotPage(web.ForgotView{Sent: true, Logged: d.ctl.MemberLinksLogged()}))
}

package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// SessionCookie is the name of the dashboard's session cookie.
const SessionCookie = "sluice_session"

// SessionTTL is how long a sign-in lasts.
const SessionTTL = control.SessionTTL

// csrfKeyLabel labels the CSRF key derived from the configured key.
const csrfKeyLabel = "sluice-dashboard-csrf"

// deriveKey derives a key for one purpose: HMAC-SHA256(key, label).
func deriveKey(key []byte, label string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	return m.Sum(nil)
}

var b64 = base64.RawURLEncoding

// Sessions live on the server (control.Session): the cookie holds only
// a random token, which CSRF tokens are bound to.

// session is a signed-in tenant, or a consumer signed in with a portal
// link, as the pages see it.
type session struct {
	tenant     sluice.Tenant
	apiKeyID   uuid.UUID // the key a tenant's session was opened with
	apiKeyName string
	// consumer is the consumer a portal session is scoped to (scope.go);
	// nil for a tenant's session.
	consumer *control.PortalConsumer
	readOnly bool // a read-only portal session: no forms, no POSTs
	// member is the member a member's session was opened by, with its
	// role as of this request; nil for other sessions.
	member *control.SessionMember
	cookie string // the cookie value (the token), to which CSRF tokens are bound
	csrf   string
}

type sessionKey struct{}

func withSession(ctx context.Context, s session) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

func sessionFromContext(ctx context.Context) (session, bool) {
	s, ok := ctx.Value(sessionKey{}).(session)
	return s, ok
}

// chrome is the page frame of a request: signed out unless it carries a
// session.
func chrome(r *http.Request, section string) web.Chrome {
	s, ok := sessionFromContext(r.Context())
	if !ok {
		return web.Chrome{}
	}
	c := web.Chrome{TenantName: s.tenant.Name, CSRF: s.csrf, Section: section, ReadOnly: !s.writes(),
		Members: s.role().Allows(string(control.ReadMembers)), AuditLog: s.role().Allows(string(control.ReadAuditLog))}
	if s.member != nil {
		c.Member, c.Role = s.member.Email, string(s.member.Role)
	}
	if s.consumer != nil {
		c.Portal, c.Consumer = true, s.consumer.Name
		if c.Consumer == "" {
			c.Consumer = s.consumer.UID
		}
	}
	return c
}

// errNoSession is a request without a live session: no cookie, a
// malformed or unknown token, or a session that expired, was signed out,
// or whose API key was revoked or expired.
var errNoSession = errors.New("not signed in")

// sessionFrom loads the request's session from the database. Any failure,
// the database's included, counts as signed out.
func (d *Dashboard) sessionFrom(r *http.Request) (session, bool) {
	s, err := d.loadSession(r)
	var pe *pageError
	if err != nil && !errors.Is(err, errNoSession) && !errors.As(err, &pe) && !sluice.Unavailable(err) {
		d.logger.ErrorContext(r.Context(), "dashboard session: load", "err", err)
	}
	return s, err == nil
}

// loadSession is sessionFrom telling errNoSession apart from a failure to
// load the session. A cookie that names no session is a failed
// authentication of the client's address; past the address's limit a
// cookie is looked up only as gateAuth allows (ratelimit.go).
func (d *Dashboard) loadSession(r *http.Request) (session, error) {
	ck, err := r.Cookie(SessionCookie)
	if err != nil || !control.WellFormedSessionToken(ck.Value) {
		return session{}, errNoSession
	}
	gate, err := d.gateAuth(r, ck.Value)
	if err != nil {
		return session{}, err
	}
	ds, err := d.ctl.Session(r.Context(), ck.Value)
	switch {
	case errors.Is(err, sluice.ErrNotFound):
		if err := d.failGated(r, gate); err != nil {
			return session{}, err
		}
		return session{}, errNoSession
	case err != nil:
		return session{}, err
	case ds.APIKeyID == nil && ds.Consumer == nil && ds.Member == nil:
		return session{}, errNoSession // neither a tenant's nor a portal session
	}
	d.limits.Verified(ck.Value)
	s := session{tenant: ds.Tenant, consumer: ds.Consumer, readOnly: ds.ReadOnly,
		cookie: ck.Value, csrf: d.csrf.token(ck.Value)}
	switch {
	case ds.APIKeyID != nil:
		s.apiKeyID, s.apiKeyName, s.consumer, s.readOnly = *ds.APIKeyID, ds.APIKeyName, nil, false
	case ds.Member != nil:
		s.member, s.consumer, s.readOnly = ds.Member, nil, false
	}
	return s, nil
}

// role is what the session may do (sluice.Role.Allows): a member's role;
// an API key's session is an owner's, as the key is through the API. A
// portal session is an owner of its consumer's scope, less a read-only
// link's POSTs (readOnlyGuard); the tenant's own pages are not its
// (tenantOnly).
func (s session) role() sluice.Role {
	if s.member != nil {
		return s.member.Role
	}
	return sluice.RoleOwner
}

// writes reports whether the session may change anything, and so see
// forms: not a read-only portal link's, nor a viewer's.
func (s session) writes() bool { return !s.readOnly && !s.role().ReadOnly() }

// bucketKey names the session's own rate-limit bucket: a tenant's session
// has its own, while a consumer's portal sessions share their consumer's,
// so that opening more sessions from a portal link gains nothing.
func (s session) bucketKey() string {
	if s.consumer != nil {
		return consumerBucket(s.consumer.ID)
	}
	return s.cookie
}

// consumerBucket names the bucket of a consumer's portal sessions.
func consumerBucket(consumerID uuid.UUID) string { return "consumer " + consumerID.String() }

// readOnlyGuard refuses, with 403, every request of a read-only session
// that is not a GET or HEAD, whatever its route: read-only sessions change
// nothing. It runs after requireSession.
func (d *Dashboard) readOnlyGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, _ := sessionFromContext(r.Context())
		if s.readOnly && r.Method != http.MethodGet && r.Method != http.MethodHead {
			d.writeError(w, r, errReadOnly())
			return
		}
		next.ServeHTTP(w, r)
	})
}

// writersOnly refuses, with 403, every request of a session that may not
// change anything (a read-only portal link's, a viewer's): for the pages
// that exist only to lead to a change, such as forms and confirmations.
func (d *Dashboard) writersOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, _ := sessionFromContext(r.Context())
		switch {
		case s.readOnly:
			d.writeError(w, r, errReadOnly())
			return
		case !s.writes():
			d.writeError(w, r, errRole(s.role()))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// tenantOnly answers the dashboard's 404 to portal sessions: for the pages
// only a tenant has (API keys, consumers).
func (d *Dashboard) tenantOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s, _ := sessionFromContext(r.Context()); s.consumer != nil {
			d.writeError(w, r, errNotFound())
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireSession lets only signed-in requests through. A page asked for
// without a session redirects to /login (and back after); any other method
// is refused. A request of a session then pays its cost from the
// session's bucket and its tenant's (ratelimit.go), or is answered 429.
func (d *Dashboard) requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := d.loadSession(r)
		switch {
		case err == nil:
			r = r.WithContext(withSession(r.Context(), s))
			if err := d.limitRequest(r, s); err != nil {
				d.writeError(w, r, err)
				return
			}
			next.ServeHTTP(w, r)
			return
		case !errors.Is(err, errNoSession):
			d.writeError(w, r, err) // the database, most likely: not a reason to sign out
			return
		}
		if _, err := r.Cookie(SessionCookie); err == nil {
			d.clearSessionCookie(w, r)
		}
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			to := "/login"
			if r.URL.Path != "/" {
				to += "?" + url.Values{"next": {r.URL.RequestURI()}}.Encode()
			}
			http.Redirect(w, r, to, http.StatusSeeOther)
			return
		}
		d.writeError(w, r, errForbidden("You are not signed in, or your session has expired. Sign in and try again."))
	})
}

// secure reports whether the session cookie must be Secure: always when
// the dashboard's public URL is https (Config.SecureCookies), and whenever
// the browser reached us over https, directly or through a trusted proxy
// that says so (apirate.TrustProxies); anyone else's say is not believed.
func (d *Dashboard) secure(r *http.Request) bool {
	return d.secureCookies || r.TLS != nil || apirate.ForwardedHTTPS(r)
}

func (d *Dashboard) setSessionCookie(w http.ResponseWriter, r *http.Request, value string, expires time.Time) {
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: value, Path: "/",
		Expires: expires, MaxAge: int(time.Until(expires).Seconds()),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: d.secure(r),
	})
}

func (d *Dashboard) clearSessionCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: d.secure(r),
	})
}

// safeNext returns next when it is a path on this site, "/" otherwise, so
// that the sign-in form cannot be made to redirect elsewhere.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	return next
}

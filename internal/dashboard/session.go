package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/web"
)

// SessionCookie is the name of the dashboard's session cookie.
const SessionCookie = "sluice_session"

// SessionTTL is how long a sign-in lasts.
const SessionTTL = 12 * time.Hour

// Labels of the keys derived from the configured key, one per use.
const (
	sessionKeyLabel = "sluice-dashboard-session"
	csrfKeyLabel    = "sluice-dashboard-csrf"
)

// deriveKey derives a key for one purpose: HMAC-SHA256(key, label).
func deriveKey(key []byte, label string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	return m.Sum(nil)
}

var b64 = base64.RawURLEncoding

// sessionVersion prefixes every cookie value, so the format can change.
const sessionVersion = "v1"

// sessionCodec signs and verifies session cookie values. Sessions are
// stateless: a value is
//
//	v1.<tenant id>.<expiry, unix seconds>.<nonce>.<HMAC-SHA256 of what precedes>
//
// The random nonce makes every sign-in's value, and so its CSRF token,
// unique.
type sessionCodec struct {
	key []byte
}

// errBadSession reports a session cookie that is malformed, forged or
// expired.
var errBadSession = errors.New("invalid session")

func (c sessionCodec) sign(payload string) string {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(payload))
	return b64.EncodeToString(m.Sum(nil))
}

// encode returns the cookie value of a session of tenantID until expires.
func (c sessionCodec) encode(tenantID uuid.UUID, expires time.Time) string {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce) // never fails
	payload := strings.Join([]string{sessionVersion, tenantID.String(),
		strconv.FormatInt(expires.Unix(), 10), b64.EncodeToString(nonce)}, ".")
	return payload + "." + c.sign(payload)
}

// decode verifies a cookie value and returns its tenant id, if it is
// well-formed, signed with this key and not expired at now.
func (c sessionCodec) decode(value string, now time.Time) (uuid.UUID, error) {
	i := strings.LastIndexByte(value, '.')
	if i < 0 {
		return uuid.Nil, errBadSession
	}
	payload, sig := value[:i], value[i+1:]
	if !hmac.Equal([]byte(sig), []byte(c.sign(payload))) {
		return uuid.Nil, errBadSession
	}
	parts := strings.Split(payload, ".")
	if len(parts) != 4 || parts[0] != sessionVersion {
		return uuid.Nil, errBadSession
	}
	tenantID, err := uuid.Parse(parts[1])
	if err != nil {
		return uuid.Nil, errBadSession
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || !now.Before(time.Unix(exp, 0)) {
		return uuid.Nil, errBadSession
	}
	return tenantID, nil
}

// session is a signed-in tenant, as the pages see it.
type session struct {
	tenant sluice.Tenant
	cookie string // the cookie value, to which CSRF tokens are bound
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

// tenantID is the signed-in tenant of a request that passed requireSession.
func tenantID(r *http.Request) uuid.UUID {
	s, _ := sessionFromContext(r.Context())
	return s.tenant.ID
}

// chrome is the page frame of a request: signed out unless it carries a
// session.
func chrome(r *http.Request, section string) web.Chrome {
	s, ok := sessionFromContext(r.Context())
	if !ok {
		return web.Chrome{}
	}
	return web.Chrome{TenantName: s.tenant.Name, CSRF: s.csrf, Section: section}
}

// errNoSession is a request without a valid session: no cookie, a bad or
// expired one, or one of a tenant that no longer exists.
var errNoSession = errors.New("not signed in")

// sessionFrom reads and verifies the request's session cookie and loads its
// tenant; a tenant that no longer exists ends the session. Any failure,
// the database's included, counts as signed out.
func (d *Dashboard) sessionFrom(r *http.Request) (session, bool) {
	s, err := d.loadSession(r)
	if err != nil && !errors.Is(err, errNoSession) && !store.Unavailable(err) {
		d.logger.ErrorContext(r.Context(), "dashboard session: load tenant", "err", err)
	}
	return s, err == nil
}

// loadSession is sessionFrom telling errNoSession apart from a failure to
// load the tenant.
func (d *Dashboard) loadSession(r *http.Request) (session, error) {
	ck, err := r.Cookie(SessionCookie)
	if err != nil {
		return session{}, errNoSession
	}
	id, err := d.sessions.decode(ck.Value, time.Now())
	if err != nil {
		return session{}, errNoSession
	}
	tenant, err := d.store.GetTenant(r.Context(), id)
	switch {
	case errors.Is(err, sluice.ErrNotFound):
		return session{}, errNoSession
	case err != nil:
		return session{}, err
	}
	return session{tenant: tenant, cookie: ck.Value, csrf: d.csrf.token(ck.Value)}, nil
}

// requireSession lets only signed-in requests through. A page asked for
// without a session redirects to /login (and back after); any other method
// is refused.
func (d *Dashboard) requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := d.loadSession(r)
		switch {
		case err == nil:
			next.ServeHTTP(w, r.WithContext(withSession(r.Context(), s)))
			return
		case !errors.Is(err, errNoSession):
			d.writeError(w, r, err) // the database, most likely: not a reason to sign out
			return
		}
		if _, err := r.Cookie(SessionCookie); err == nil {
			clearSessionCookie(w, r)
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

// isHTTPS reports whether the browser reached us over https, directly or
// through a proxy that says so.
func isHTTPS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func setSessionCookie(w http.ResponseWriter, r *http.Request, value string, expires time.Time) {
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: value, Path: "/",
		Expires: expires, MaxAge: int(time.Until(expires).Seconds()),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: isHTTPS(r),
	})
}

func clearSessionCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: isHTTPS(r),
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

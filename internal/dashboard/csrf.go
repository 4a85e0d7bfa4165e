package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"net/http"
	"strings"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/eventschema"
)

// csrfField is the form field every POST form carries its token in.
const csrfField = "csrf_token"

// maxFormBytes bounds a form body; the dashboard's forms are tiny, but for
// the event-type forms (formLimit).
const maxFormBytes = 64 << 10

// maxEventTypeFormBytes bounds an event-type form, whose example (a
// payload) and schema may each take three bytes a character once
// URL-encoded.
const maxEventTypeFormBytes = 3*(control.MaxPayloadBytes+eventschema.MaxSchemaBytes) + maxFormBytes

// formLimit is the bound of the form body of r.
func formLimit(r *http.Request) int64 {
	if strings.HasPrefix(r.URL.Path, "/event-types") {
		return maxEventTypeFormBytes
	}
	return maxFormBytes
}

// csrfSigner makes and checks CSRF tokens: a token is the HMAC-SHA256 of the
// session cookie's value under a key derived for this purpose, so it is
// bound to one sign-in and needs no storage. A cross-site page can make the
// browser send the cookie, but cannot read it or the token.
type csrfSigner struct {
	key []byte
}

// token returns the CSRF token of a session cookie value.
func (c csrfSigner) token(cookie string) string {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(cookie))
	return b64.EncodeToString(m.Sum(nil))
}

// valid reports whether token belongs to the session cookie value.
func (c csrfSigner) valid(cookie, token string) bool {
	return token != "" && hmac.Equal([]byte(token), []byte(c.token(cookie)))
}

// requireCSRF refuses, with 403, every request of a session that is not a
// GET or HEAD and does not carry the session's CSRF token in its form. It
// runs after requireSession.
func (d *Dashboard) requireCSRF(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		s, _ := sessionFromContext(r.Context())
		if err := d.checkCSRF(w, r, s); err != nil {
			d.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkCSRF parses the form of r and checks its token against s.
func (d *Dashboard) checkCSRF(w http.ResponseWriter, r *http.Request, s session) error {
	r.Body = http.MaxBytesReader(w, r.Body, formLimit(r))
	if err := r.ParseForm(); err != nil {
		return errBadRequest("The form could not be read.")
	}
	if !d.csrf.valid(s.cookie, r.PostForm.Get(csrfField)) {
		return errForbidden("The form's security token is missing or out of date. Go back, reload the page and try again.")
	}
	return nil
}

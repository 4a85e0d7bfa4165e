package operator

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// Realm names the operator's credential in the browser's sign-in prompt.
const Realm = "Sluice operator"

// requireToken lets a request through only if it carries the operator
// token, as the password of HTTP Basic auth (any user name; what a browser
// sends after its prompt) or as "Authorization: Bearer <token>" (for
// scripts). Anything else answers 401 with a Basic challenge.
func requireToken(token string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := credential(r)
		if !ok || !equalHashed(want, got) {
			unauthorized(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// credential is the token a request presents, if any.
func credential(r *http.Request) (string, bool) {
	if _, password, ok := r.BasicAuth(); ok {
		return password, true
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// equalHashed compares in constant time, and by SHA-256 so that neither
// the time taken nor an early return tells the token's length.
func equalHashed(want [sha256.Size]byte, got string) bool {
	h := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(want[:], h[:]) == 1
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Basic realm="`+Realm+`", charset="UTF-8"`)
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte(`{"type":"https://sluice.dev/problems/unauthorized","title":"Unauthorized",` +
		`"status":401,"detail":"send the operator token (SLUICE_OPERATOR_TOKEN) as the password of HTTP Basic auth, or as a Bearer token"}` + "\n"))
}

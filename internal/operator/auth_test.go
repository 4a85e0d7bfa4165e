package operator

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRequireToken(t *testing.T) {
	t.Parallel()
	const token = "op_0123456789abcdefghijklmnopqrstuvwxyz"
	h := requireToken(token, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	try := func(set func(*http.Request)) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, Prefix+"/", nil)
		set(req)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for name, set := range map[string]func(*http.Request){
		"basic, any user":   func(r *http.Request) { r.SetBasicAuth("anyone", token) },
		"basic, no user":    func(r *http.Request) { r.SetBasicAuth("", token) },
		"bearer":            func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) },
		"bearer lower case": func(r *http.Request) { r.Header.Set("Authorization", "bearer "+token) },
	} {
		require.Equal(t, http.StatusTeapot, try(set).Code, name)
	}
	for name, set := range map[string]func(*http.Request){
		"none":                 func(*http.Request) {},
		"token as basic user":  func(r *http.Request) { r.SetBasicAuth(token, "") },
		"empty basic":          func(r *http.Request) { r.SetBasicAuth("", "") },
		"prefix of the token":  func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token[:len(token)-1]) },
		"token and more":       func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token+"x") },
		"bearer without token": func(r *http.Request) { r.Header.Set("Authorization", "Bearer ") },
		"token without scheme": func(r *http.Request) { r.Header.Set("Authorization", token) },
		"other scheme":         func(r *http.Request) { r.Header.Set("Authorization", "Token "+token) },
	} {
		rec := try(set)
		require.Equal(t, http.StatusUnauthorized, rec.Code, name)
		require.Equal(t, `Basic realm="Sluice operator", charset="UTF-8"`, rec.Header().Get("WWW-Authenticate"), name)
		require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"), name)
	}
}

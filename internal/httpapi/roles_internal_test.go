package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// TestRolesThroughTheAPI: the API's one role check refuses, with 403
// problem+json, every action and guarded read a role may not make: an
// admin no member.* action and every other, a viewer none of them but the
// reads no action names; an API key (owner) everything.
func TestRolesThroughTheAPI(t *testing.T) {
	t.Parallel()
	for _, role := range sluice.Roles {
		t.Run(string(role), func(t *testing.T) {
			t.Parallel()
			outer := chi.NewRouter()
			r := chi.NewRouter()
			outer.Mount("/v1", r)
			r.Use(func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
					next.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), roleKey{}, role)))
				})
			})
			r.Use(authorized(r))
			ok := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }
			routes := map[string]string{"GET /endpoints/{id}": ""} // a read no action names
			for k, a := range auditActions {
				routes[k] = string(a)
			}
			for k, a := range guardedReads {
				routes[k] = a
			}
			for k := range routes {
				method, pattern, _ := strings.Cut(k, " ")
				r.Method(method, pattern, http.HandlerFunc(ok))
			}
			for k, action := range routes {
				method, pattern, _ := strings.Cut(k, " ")
				path := strings.NewReplacer("{id}", "0193a5c8-7d3e-7c6a-9d7e-2f5b8a1c4e91", "{uid}", "acme", "{name}", "order.created").Replace(pattern)
				w := httptest.NewRecorder()
				outer.ServeHTTP(w, httptest.NewRequest(method, "/v1"+path, nil))
				want := action == "" || role == sluice.RoleOwner ||
					role == sluice.RoleAdmin && !strings.HasPrefix(action, "member.")
				if want {
					require.Equal(t, http.StatusOK, w.Code, "%s as %s", k, role)
					continue
				}
				require.Equal(t, http.StatusForbidden, w.Code, "%s as %s", k, role)
				require.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
				require.Contains(t, w.Body.String(), typeForbidden)
			}
		})
	}
}

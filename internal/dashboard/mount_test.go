package dashboard_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dashboard"
	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
)

// TestMountsBesideAPI mounts the dashboard and the API on one router, as
// `sluice serve` does, in either order: each keeps its own routes and its
// own 404s.
func TestMountsBesideAPI(t *testing.T) {
	b := setup(t)
	for _, dashboardFirst := range []bool{false, true} {
		r := chi.NewRouter()
		api := httpapi.New(controltest.New(b.store, controltest.Options{Nudger: b.nudger}), httpapi.Config{})
		dash := dashboard.New(controltest.New(b.store, controltest.Options{PortalKey: dashboardKey, Nudger: b.nudger}), dashboard.Config{Key: dashboardKey})
		if dashboardFirst {
			dash.Mount(r)
			api.Mount(r)
		} else {
			api.Mount(r)
			dash.Mount(r)
		}
		srv := httptest.NewServer(r)
		get := func(path string, key string) *http.Response {
			t.Helper()
			req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
			require.NoError(t, err)
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
			require.NoError(t, err)
			res.Body.Close()
			return res
		}
		res := get("/healthz", "")
		require.Equal(t, http.StatusOK, res.StatusCode)
		res = get("/v1/endpoints", b.keyA)
		require.Equal(t, http.StatusOK, res.StatusCode)
		res = get("/v1/no-such-thing", b.keyA)
		require.Equal(t, http.StatusNotFound, res.StatusCode)
		require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
		res = get("/no-such-page", "")
		require.Equal(t, http.StatusNotFound, res.StatusCode)
		require.Contains(t, res.Header.Get("Content-Type"), "text/html")
		res = get("/", "")
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		require.Equal(t, "/login", res.Header.Get("Location"))
		srv.Close()
	}
}

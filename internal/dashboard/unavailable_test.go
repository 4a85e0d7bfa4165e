package dashboard_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dashboard"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestDatabaseUnavailable checks that the dashboard answers 503 with
// Retry-After, not 500 and not a sign-out, while its database cannot be
// reached: for a signed-in page and for signing in.
func TestDatabaseUnavailable(t *testing.T) {
	b := setup(t)
	br := b.browser()
	br.login(b.keyA)
	cookie := br.sessionCookie()
	down := httptest.NewServer(dashboard.New(controltest.New(storetest.Unreachable(t), controltest.Options{PortalKey: dashboardKey, Nudger: b.nudger}), dashboard.Config{Key: dashboardKey}).Handler())
	t.Cleanup(down.Close)

	page, err := http.NewRequest(http.MethodGet, down.URL+"/events", nil)
	require.NoError(t, err)
	page.AddCookie(&http.Cookie{Name: dashboard.SessionCookie, Value: cookie})
	login, err := http.NewRequest(http.MethodPost, down.URL+"/login", strings.NewReader(url.Values{"api_key": {b.keyA}}.Encode()))
	require.NoError(t, err)
	login.Header.Set("Content-Type", "application/x-www-form-urlencoded")

	for _, req := range []*http.Request{page, login} {
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "%s %s: %s", req.Method, req.URL.Path, body)
		require.Equal(t, "1", res.Header.Get("Retry-After"))
		require.Contains(t, string(body), "cannot reach its database")
		require.Empty(t, res.Cookies(), "the session is kept")
	}
}

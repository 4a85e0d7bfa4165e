package app_test

import (
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
)

// TestDoorsShareOneBucket: the API and the dashboard of one process draw
// from one bucket per tenant. At 2/m (bursts of 1, refilled in 30 s) one
// API request empties it, and the tenant's sign-in to the dashboard is
// refused until it refills.
func TestDoorsShareOneBucket(t *testing.T) {
	h := startWith(t, map[string]string{"SLUICE_API_RATE": "2/m"}, app.Roles{API: true, Dashboard: true})
	h.call(http.MethodGet, "/v1/endpoints", nil, http.StatusOK, nil)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.PostForm(h.srv.URL+"/login", url.Values{"api_key": {h.key}})
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, string(body))
	require.Contains(t, string(body), "rate limit, which its API, dashboard and portal share")
	require.NotEmpty(t, res.Header.Get("Retry-After"))
	h.call(http.MethodGet, "/v1/endpoints", nil, http.StatusTooManyRequests, nil)
}

package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"

	"github.com/sluice-dev/sluice/internal/apikey"
)

func TestAuth(t *testing.T) {
	b := setup(t)

	for name, header := range map[string]string{
		"missing":        "",
		"wrong scheme":   "Basic " + b.keyA,
		"malformed key":  "Bearer not-a-key",
		"unknown key":    "Bearer " + apikey.New(),
		"empty bearer":   "Bearer ",
		"truncated key":  "Bearer " + b.keyA[:len(b.keyA)-1],
		"key with extra": "Bearer " + b.keyA + "x",
	} {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/v1/endpoints", nil)
			require.NoError(t, err)
			if header != "" {
				req.Header.Set("Authorization", header)
			}
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			res.Body.Close()
			require.Equal(t, http.StatusUnauthorized, res.StatusCode)
			require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
			require.NotEmpty(t, res.Header.Get("WWW-Authenticate"))
		})
	}

	r := b.do("", http.MethodGet, "/v1/subscriptions", nil)
	requireProblem(t, r, http.StatusUnauthorized)

	// Lower-case scheme is accepted, as RFC 9110 makes schemes case-insensitive.
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/v1/endpoints", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "bearer "+b.keyA)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)

	// A second key of the same tenant sees the same objects.
	ep := b.createEndpoint(b.keyA, nil)
	k2 := sluice.NewAPIKey{Key: apikey.New()}
	_, err = b.store.CreateAPIKey(t.Context(), b.tenantA.ID, sluice.NewAPIKeyParams{Name: "second"}, apikey.Digest(k2.Key))
	require.NoError(t, err)
	key2 := k2.Key
	r = b.do(key2, http.MethodGet, "/v1/endpoints/"+ep["id"].(string), nil)
	require.Equal(t, http.StatusOK, r.Status)
}

func TestHealthNeedsNoKey(t *testing.T) {
	b := setup(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		r := b.do("", http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, r.Status, path)
	}
	res, err := http.Get(b.srv.URL + "/metrics")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
}

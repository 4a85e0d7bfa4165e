package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
)

// TestTenantSetRate sets a tenant's API rate with the CLI while an API
// serves it: the API's RateLimit headers follow within a couple of seconds,
// and "default" returns the tenant to SLUICE_API_RATE.
func TestTenantSetRate(t *testing.T) {
	useDatabase(t)
	id, key := createTenant(t, "Acme", "ops@acme.example")
	pool, err := pgxpool.New(context.Background(), os.Getenv("DATABASE_URL"))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	api := httpapi.New(controltest.New(store.New(pool, nil), controltest.Options{}), httpapi.Config{})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)

	limit := func() string {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/endpoints", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := srv.Client().Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.Header.Get("RateLimit-Limit")
	}
	require.Equal(t, "200", limit(), "the default, 100/s, has bursts of 200")

	out, err := runCmd(t, "tenant", "set-rate", "--tenant", id.String(), "--rate", "50/s")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"tenant_id": id.String(), "api_rate": "50/s"}, decodeExact(t, out, "tenant_id", "api_rate"))
	require.Eventually(t, func() bool { return limit() == "100" }, 3*time.Second, 50*time.Millisecond, "50/s has bursts of 100")

	_, err = runCmd(t, "tenant", "set-rate", "--tenant", id.String(), "--rate", "default")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return limit() == "200" }, 3*time.Second, 50*time.Millisecond)

	for _, bad := range [][]string{
		{"--tenant", id.String(), "--rate", "fast"},
		{"--tenant", id.String()},
		{"--tenant", "nope", "--rate", "5/s"},
		{"--tenant", "00000000-0000-0000-0000-000000000000", "--rate", "5/s"},
	} {
		_, err := runCmd(t, append([]string{"tenant", "set-rate"}, bad...)...)
		require.Error(t, err, bad)
	}
}

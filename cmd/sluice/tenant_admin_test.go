package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
)

// listTenants runs `tenant list` and decodes its one line of JSON, keeping
// each tenant as raw fields so the exact set of keys can be checked.
func listTenants(t *testing.T) []map[string]any {
	t.Helper()
	out, err := runCmd(t, "tenant", "list")
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(out, "\n"), "one line: %q", out)
	var got struct {
		Tenants []map[string]any `json:"tenants"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	return got.Tenants
}

// TestTenantListDisableEnable: `tenant list` shows every tenant; `tenant
// disable` makes a running API refuse the tenant's key with 403 within a
// second, leaving other tenants alone; `tenant enable` undoes it.
func TestTenantListDisableEnable(t *testing.T) {
	useDatabase(t)
	require.Empty(t, listTenants(t))
	acme, acmeKey := createTenant(t, "Acme", "ops@acme.example")
	globex, globexKey := createTenant(t, "Globex", "ops@globex.example")

	tenants := listTenants(t)
	require.Len(t, tenants, 2)
	require.Equal(t, globex.String(), tenants[0]["id"], "newest first")
	require.Equal(t, acme.String(), tenants[1]["id"])
	acmeRow := tenants[1]
	require.ElementsMatch(t, []string{"id", "name", "alert_email", "created_at", "disabled", "disabled_at"}, keys(acmeRow))
	require.Equal(t, "Acme", acmeRow["name"])
	require.Equal(t, "ops@acme.example", acmeRow["alert_email"])
	require.Equal(t, false, acmeRow["disabled"])
	require.Nil(t, acmeRow["disabled_at"])
	created, err := time.Parse(time.RFC3339Nano, acmeRow["created_at"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), created, time.Minute)

	pool, err := pgxpool.New(context.Background(), os.Getenv("DATABASE_URL"))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	api := httpapi.New(controltest.New(store.New(pool, nil), controltest.Options{}), httpapi.Config{})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	status := func(key string) int {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/endpoints", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := srv.Client().Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	require.Equal(t, http.StatusOK, status(acmeKey))

	out, err := runCmd(t, "tenant", "disable", "--tenant", acme.String())
	require.NoError(t, err)
	var shown map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &shown), out)
	require.Equal(t, acme.String(), shown["id"])
	require.Equal(t, true, shown["disabled"])
	require.NotNil(t, shown["disabled_at"])
	require.Eventually(t, func() bool { return status(acmeKey) == http.StatusForbidden }, time.Second, 20*time.Millisecond)
	require.Equal(t, http.StatusOK, status(globexKey))
	tenants = listTenants(t)
	require.Equal(t, true, tenants[1]["disabled"])
	require.Equal(t, shown["disabled_at"], tenants[1]["disabled_at"])
	require.Equal(t, false, tenants[0]["disabled"])

	out, err = runCmd(t, "tenant", "enable", "--tenant", acme.String())
	require.NoError(t, err)
	require.Contains(t, out, `"disabled":false`)
	require.Eventually(t, func() bool { return status(acmeKey) == http.StatusOK }, time.Second, 20*time.Millisecond)
	require.Equal(t, false, listTenants(t)[1]["disabled"])

	for _, bad := range [][]string{
		{"tenant", "disable"},
		{"tenant", "disable", "--tenant", "nope"},
		{"tenant", "disable", "--tenant", "00000000-0000-0000-0000-000000000000"},
		{"tenant", "enable", "--tenant", "00000000-0000-0000-0000-000000000000"},
		{"tenant", "list", "extra"},
	} {
		_, err := runCmd(t, bad...)
		require.Error(t, err, bad)
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

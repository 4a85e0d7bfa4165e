package httpapi_test

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
)

// createKey makes an API key as the holder of key and returns its JSON.
func (b *testBundle) createKey(key string, body map[string]any) map[string]any {
	b.t.Helper()
	r := b.do(key, http.MethodPost, "/v1/api-keys", body)
	require.Equal(b.t, http.StatusCreated, r.Status, string(r.Body))
	return r.JSON(b.t)
}

func TestAPIKeys(t *testing.T) {
	b := setup(t)
	created := b.createKey(b.keyA, map[string]any{"name": "ci"})
	key := created["key"].(string)
	require.True(t, apikey.WellFormed(key))
	require.Equal(t, "ci", created["name"])
	require.Equal(t, apikey.DisplayPrefix(key), created["prefix"])
	require.Nil(t, created["expires_at"])
	require.Nil(t, created["last_used_at"])
	id := created["id"].(string)

	// The new key works, and its use is recorded.
	require.Equal(t, http.StatusOK, b.do(key, http.MethodGet, "/v1/endpoints", nil).Status)

	// Listed newest first, never with the key itself, page by page.
	r := b.do(b.keyA, http.MethodGet, "/v1/api-keys?limit=1", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.NotContains(t, string(r.Body), key)
	require.NotContains(t, string(r.Body), b.keyA)
	page := r.JSON(t)
	data := page["data"].([]any)
	require.Len(t, data, 1)
	first := data[0].(map[string]any)
	require.Equal(t, id, first["id"])
	require.NotContains(t, first, "key")
	require.NotNil(t, first["last_used_at"], "the new key was used")
	cursor := page["next_cursor"].(string)
	r = b.do(b.keyA, http.MethodGet, "/v1/api-keys?limit=1&cursor="+cursor, nil)
	page = r.JSON(t)
	require.Len(t, page["data"], 1)
	require.Equal(t, "default", page["data"].([]any)[0].(map[string]any)["name"])
	require.Nil(t, page["next_cursor"])

	// With an expiry.
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	withExp := b.createKey(b.keyA, map[string]any{"name": "temp", "expires_at": exp.Format(time.RFC3339)})
	got, err := time.Parse(time.RFC3339, withExp["expires_at"].(string))
	require.NoError(t, err)
	require.True(t, exp.Equal(got))

	// Revoke: 204, then the key answers 401 (within a second) and the id 404.
	require.Equal(t, http.StatusNoContent, b.do(b.keyA, http.MethodDelete, "/v1/api-keys/"+id, nil).Status)
	requireProblem(t, b.do(b.keyA, http.MethodDelete, "/v1/api-keys/"+id, nil), http.StatusNotFound)
	require.Eventually(t, func() bool {
		return b.do(key, http.MethodGet, "/v1/endpoints", nil).Status == http.StatusUnauthorized
	}, time.Second, 20*time.Millisecond)
	requireProblem(t, b.do(b.keyA, http.MethodDelete, "/v1/api-keys/not-an-id", nil), http.StatusNotFound)
}

func TestAPIKeyValidation(t *testing.T) {
	b := setup(t)
	for name, tc := range map[string]struct {
		body  any
		field string
	}{
		"no name":          {map[string]any{}, "name"},
		"empty name":       {map[string]any{"name": ""}, "name"},
		"blank name":       {map[string]any{"name": "   "}, "name"},
		"long name":        {map[string]any{"name": strings.Repeat("é", 101)}, "name"},
		"past expiry":      {map[string]any{"name": "x", "expires_at": time.Now().Add(-time.Minute).Format(time.RFC3339)}, "expires_at"},
		"malformed expiry": {map[string]any{"name": "x", "expires_at": "tomorrow"}, "expires_at"},
		"unknown field":    {map[string]any{"name": "x", "scopes": []string{"all"}}, "scopes"},
		"name not string":  {map[string]any{"name": 7}, "name"},
	} {
		t.Run(name, func(t *testing.T) {
			p := requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/api-keys", tc.body), http.StatusUnprocessableEntity)
			fields := p["errors"].([]any)
			require.NotEmpty(t, fields)
			require.Equal(t, tc.field, fields[0].(map[string]any)["field"], "%v", p)
		})
	}
	// 100 characters is fine.
	b.createKey(b.keyA, map[string]any{"name": strings.Repeat("é", 100)})
}

// TestAPIKeyTenantIsolation: another tenant's key id is 404, as an unknown
// one, and is not revoked; lists show only the tenant's own keys.
func TestAPIKeyTenantIsolation(t *testing.T) {
	b := setup(t)
	a := b.createKey(b.keyA, map[string]any{"name": "acme ci"})
	r := b.do(b.keyB, http.MethodDelete, "/v1/api-keys/"+a["id"].(string), nil)
	requireProblem(t, r, http.StatusNotFound)
	require.Equal(t, http.StatusOK, b.do(a["key"].(string), http.MethodGet, "/v1/endpoints", nil).Status)

	list := b.do(b.keyB, http.MethodGet, "/v1/api-keys", nil)
	require.NotContains(t, string(list.Body), a["id"].(string))
	require.Len(t, list.JSON(t)["data"], 1, "B sees only its own key")
}

// secondServer is another API process on the same database: its own pool,
// store, key cache and HTTP server.
func secondServer(t *testing.T, b *testBundle) *httptest.Server {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), b.store.Pool().Config().ConnString())
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	api := httpapi.New(controltest.New(store.New(pool, nil), controltest.Options{Nudger: b.nudger}), httpapi.Config{})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return srv
}

func status(t *testing.T, srv *httptest.Server, key string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/endpoints", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := srv.Client().Do(req)
	require.NoError(t, err)
	res.Body.Close()
	return res.StatusCode
}

// TestRevokedKeyIsRefusedOnEveryProcess revokes a key through one API
// server while another, over its own pool, has the key freshly cached:
// both must answer 401 within one second.
func TestRevokedKeyIsRefusedOnEveryProcess(t *testing.T) {
	b := setup(t)
	other := secondServer(t, b)
	key := b.createKey(b.keyA, map[string]any{"name": "leaked"})
	id, k := key["id"].(string), key["key"].(string)

	// Both processes have the key cached, the second one just now.
	require.Equal(t, http.StatusOK, status(t, b.srv, k))
	require.Equal(t, http.StatusOK, status(t, other, k))

	start := time.Now()
	require.Equal(t, http.StatusNoContent, b.do(b.keyA, http.MethodDelete, "/v1/api-keys/"+id, nil).Status)
	revoked := time.Now()
	var mu sync.Mutex // the polls below run on Eventually's goroutines
	flipped := map[string]time.Duration{}
	refused := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for name, srv := range map[string]*httptest.Server{"this": b.srv, "other": other} {
			if _, ok := flipped[name]; !ok && status(t, srv, k) == http.StatusUnauthorized {
				flipped[name] = time.Since(revoked)
			}
		}
		return len(flipped) == 2
	}
	// A bounded poll of both processes; the bound is checked below.
	assert.Eventually(t, refused, 3*time.Second, 5*time.Millisecond)
	mu.Lock()
	flipped = maps.Clone(flipped)
	mu.Unlock()
	t.Logf("revoked key refused after %v on the revoking process, %v on the other (DELETE took %v)",
		flipped["this"], flipped["other"], revoked.Sub(start))
	for _, name := range []string{"this", "other"} {
		d, ok := flipped[name]
		require.True(t, ok, "%s process still accepts the key 3s after revocation", name)
		require.Less(t, d, time.Second, "%s process took %v", name, d)
	}
	// And it stays refused.
	require.Equal(t, http.StatusUnauthorized, status(t, other, k))
}

// TestExpiredKeyIsRefused: a key answers 401 from its expiry on, even on a
// process that has it cached.
func TestExpiredKeyIsRefused(t *testing.T) {
	b := setup(t)
	other := secondServer(t, b)
	exp := time.Now().Add(1500 * time.Millisecond).Truncate(time.Second).Add(time.Second)
	key := b.createKey(b.keyA, map[string]any{"name": "short", "expires_at": exp.Format(time.RFC3339)})
	k := key["key"].(string)
	require.Equal(t, http.StatusOK, status(t, other, k))
	// Poll the cached process until it refuses the key: it must accept it
	// until its expiry and refuse it within a second after.
	var mu sync.Mutex // the polls run on Eventually's goroutines
	var refused time.Time
	var unexpected []int
	require.Eventually(t, func() bool {
		asked := time.Now()
		s := status(t, other, k)
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StatusOK:
			return false
		case http.StatusUnauthorized:
			refused = asked
			return true
		}
		unexpected = append(unexpected, s)
		return false
	}, time.Until(exp)+time.Second, 10*time.Millisecond, "refused within a second of expiry")
	mu.Lock()
	require.Empty(t, unexpected, "answers other than 200 and 401")
	require.False(t, refused.Before(exp.Add(-100*time.Millisecond)), "valid until %v, refused from %v", exp, refused)
	mu.Unlock()
	r := b.do(k, http.MethodGet, "/v1/endpoints", nil)
	requireProblem(t, r, http.StatusUnauthorized)
	// Still listed, until revoked.
	require.Contains(t, string(b.do(b.keyA, http.MethodGet, "/v1/api-keys", nil).Body), key["id"].(string))
}

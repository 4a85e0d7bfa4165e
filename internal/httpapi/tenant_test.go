package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTenantRetention: GET /v1/tenant shows the server's retention until
// the tenant sets its own with PATCH, which answers 422 naming the field
// for a value out of [1h, the server's], not a duration, or not a string;
// a field left out stays, null is the server's. The tenant's delivered
// deliveries older than its new retention are gone from the API at once,
// its events with them, while another tenant's of the same age are not.
func TestTenantRetention(t *testing.T) {
	b := setup(t)

	r := b.do(b.keyA, http.MethodGet, "/v1/tenant", nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	got := r.JSON(t)
	require.Nil(t, got["retention"])
	require.Nil(t, got["dead_retention"])
	require.Equal(t, "336h", got["server_retention"])
	require.Equal(t, "720h", got["server_dead_retention"])

	for name, tc := range map[string]struct {
		body  any
		field string
	}{
		"too short":      {map[string]any{"retention": "59m"}, "retention"},
		"too long":       {map[string]any{"dead_retention": "721h"}, "dead_retention"},
		"not a duration": {map[string]any{"retention": "a day"}, "retention"},
		"not a string":   {map[string]any{"dead_retention": 86400}, "dead_retention"},
	} {
		r := b.do(b.keyA, http.MethodPatch, "/v1/tenant", tc.body)
		p := requireProblem(t, r, http.StatusUnprocessableEntity)
		require.Equal(t, tc.field, p["errors"].([]any)[0].(map[string]any)["field"], name)
	}

	// An old delivered delivery of each tenant, three days old.
	oldA, oldB := b.oldDelivery(t, b.keyA), b.oldDelivery(t, b.keyB)
	require.Equal(t, http.StatusOK, b.do(b.keyA, http.MethodGet, "/v1/deliveries/"+oldA[0], nil).Status)

	r = b.do(b.keyA, http.MethodPatch, "/v1/tenant", map[string]any{"retention": "24h", "dead_retention": "72h"})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Equal(t, "24h", r.JSON(t)["retention"])
	require.Equal(t, "72h", r.JSON(t)["dead_retention"])

	require.Equal(t, http.StatusNotFound, b.do(b.keyA, http.MethodGet, "/v1/deliveries/"+oldA[0], nil).Status)
	require.Equal(t, http.StatusNotFound, b.do(b.keyA, http.MethodGet, "/v1/events/"+oldA[1], nil).Status)
	require.Empty(t, b.do(b.keyA, http.MethodGet, "/v1/deliveries", nil).JSON(t)["data"])
	require.Empty(t, b.do(b.keyA, http.MethodGet, "/v1/events", nil).JSON(t)["data"])
	require.Equal(t, http.StatusOK, b.do(b.keyB, http.MethodGet, "/v1/deliveries/"+oldB[0], nil).Status, "another tenant's")
	require.Equal(t, http.StatusOK, b.do(b.keyB, http.MethodGet, "/v1/events/"+oldB[1], nil).Status)

	r = b.do(b.keyA, http.MethodPatch, "/v1/tenant", map[string]any{"retention": nil})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Nil(t, r.JSON(t)["retention"], "null is the server's")
	require.Equal(t, "72h", r.JSON(t)["dead_retention"], "left out, it stays")
	require.Equal(t, http.StatusOK, b.do(b.keyA, http.MethodGet, "/v1/deliveries/"+oldA[0], nil).Status,
		"not deleted yet, so seen again under the server's retention")
}

// oldDelivery makes, for the tenant of key, an endpoint and one event
// three days old with a delivered delivery to it (by SQL, ids of that
// time), and returns the delivery's and the event's ids.
func (b *testBundle) oldDelivery(t *testing.T, key string) [2]string {
	t.Helper()
	r := b.do(key, http.MethodPost, "/v1/endpoints", map[string]any{"url": "https://example.com/hook"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	ep := r.JSON(t)["id"].(string)
	var ids [2]string
	err := b.store.Pool().QueryRow(t.Context(), `
		WITH ev AS (
			INSERT INTO events (id, tenant_id, type, payload, created_at)
			SELECT (lpad(to_hex((extract(epoch FROM now() - interval '3 days') * 1000)::bigint), 12, '0')
			        || substr(replace(gen_random_uuid()::text, '-', ''), 13))::uuid,
			       e.tenant_id, 'old', '{}', now() - interval '3 days'
			FROM endpoints e WHERE e.id = $1
			RETURNING id, tenant_id, created_at
		)
		INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, status, created_at, updated_at)
		SELECT (substr(replace(ev.id::text, '-', ''), 1, 12) || substr(replace(gen_random_uuid()::text, '-', ''), 13))::uuid,
		       ev.tenant_id, ev.id, $1, 'old', 'delivered', ev.created_at, ev.created_at
		FROM ev
		RETURNING id::text, event_id::text`, ep).Scan(&ids[0], &ids[1])
	require.NoError(t, err)
	return ids
}

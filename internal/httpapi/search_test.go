package httpapi_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/fanout"
)

// TestSearchParameters: the search parameters of GET /v1/deliveries and
// GET /v1/events reach the search (answers checked against openapi.yaml by
// b.do), and a refused value is a 422 naming its parameter.
func TestSearchParameters(t *testing.T) {
	b := setup(t)
	ep := b.createEndpoint(b.keyA, nil)["id"].(string)
	r := b.do(b.keyA, http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": ep, "event_types": []string{"*"}})
	require.Equal(t, http.StatusCreated, r.Status)
	before := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	var ids []uuid.UUID
	for _, ev := range []map[string]any{
		{"type": "invoice.paid", "payload": map[string]any{"customer": "cus_1"}},
		{"type": "invoice.failed", "payload": map[string]any{"customer": "cus_2"}},
		{"type": "order.created", "payload": map[string]any{"customer": "cus_1"}},
	} {
		r := b.do(b.keyA, http.MethodPost, "/v1/events", ev)
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		ids = append(ids, uuid.MustParse(r.JSON(t)["id"].(string)))
	}
	_, _, err := fanout.Events(t.Context(), b.store, ids, nil)
	require.NoError(t, err)

	count := func(path string) int {
		t.Helper()
		r := b.do(b.keyA, http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		return len(r.JSON(t)["data"].([]any))
	}
	require.Equal(t, 2, count("/v1/deliveries?event_type=invoice.*"))
	require.Equal(t, 3, count("/v1/deliveries?since="+url.QueryEscape(before)))
	require.Equal(t, 0, count("/v1/deliveries?until="+url.QueryEscape(before)))
	require.Equal(t, 0, count("/v1/deliveries?status_code=500-599"), "none attempted yet")
	require.Equal(t, 0, count("/v1/deliveries?consumer=nobody"))
	require.Equal(t, 2, count("/v1/events?filter="+url.QueryEscape(`{"customer": "cus_1"}`)))
	require.Equal(t, 1, count("/v1/events?type=invoice.*&filter="+url.QueryEscape(`{"customer": "cus_1"}`)))
	require.Equal(t, 3, count("/v1/events?since="+url.QueryEscape(before)))

	for _, c := range []struct{ path, field string }{
		{"/v1/deliveries?since=yesterday", "since"},
		{"/v1/deliveries?until=2026-13-01T00:00:00Z", "until"},
		{"/v1/deliveries?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", "until"},
		{"/v1/deliveries?status_code=5xx", "status_code"},
		{"/v1/deliveries?event_type=inv*", "event_type"},
		{"/v1/events?type=*", "type"},
		{"/v1/events?filter=" + url.QueryEscape(`{"customer"`), "filter"},
		{"/v1/events?since=now", "since"},
	} {
		p := requireProblem(t, b.do(b.keyA, http.MethodGet, c.path, nil), http.StatusUnprocessableEntity)
		require.Equal(t, c.field, p["errors"].([]any)[0].(map[string]any)["field"], c.path)
	}
}

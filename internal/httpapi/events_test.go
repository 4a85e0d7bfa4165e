package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/fanout"
)

// TestEventAndDeliveryRoutes walks every event, delivery and replay route
// once (each answer checked against openapi.yaml by b.do), with fan-out run
// by hand since this test has no workers.
func TestEventAndDeliveryRoutes(t *testing.T) {
	b := setup(t)
	ep := b.createEndpoint(b.keyA, nil)["id"].(string)
	r := b.do(b.keyA, http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": ep, "event_types": []string{"order.*"}})
	require.Equal(t, http.StatusCreated, r.Status)

	r = b.do(b.keyA, http.MethodPost, "/v1/events", map[string]any{"type": "order.created", "payload": map[string]any{"id": 1}, "coalesce_key": "o-1"})
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	ev := r.JSON(t)
	require.Equal(t, "o-1", ev["coalesce_key"])
	r = b.do(b.keyA, http.MethodPost, "/v1/events/batch", map[string]any{"events": []any{
		map[string]any{"type": "order.paid", "payload": map[string]any{"ids": []int{1, 2}}},
		map[string]any{"type": "user.created", "payload": map[string]any{"note": "plain string"}},
	}})
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	require.Len(t, r.JSON(t)["data"], 2)

	var ids []uuid.UUID
	for _, e := range b.do(b.keyA, http.MethodGet, "/v1/events", nil).JSON(t)["data"].([]any) {
		ids = append(ids, uuid.MustParse(e.(map[string]any)["id"].(string)))
	}
	require.Len(t, ids, 3)
	_, _, err := fanout.Events(t.Context(), b.store, ids, nil)
	require.NoError(t, err)

	got := b.do(b.keyA, http.MethodGet, "/v1/events/"+ev["id"].(string), nil).JSON(t)
	require.Len(t, got["deliveries"], 1)
	require.Len(t, b.do(b.keyA, http.MethodGet, "/v1/events?type=order.paid", nil).JSON(t)["data"], 1)

	list := b.do(b.keyA, http.MethodGet, "/v1/deliveries?status=pending&endpoint_id="+ep, nil).JSON(t)["data"].([]any)
	require.Len(t, list, 2, "two order.* events")
	dID := list[0].(map[string]any)["id"].(string)
	d := b.do(b.keyA, http.MethodGet, "/v1/deliveries/"+dID, nil).JSON(t)
	require.Empty(t, d["attempts"])
	require.Equal(t, "pending", d["status"])

	requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/deliveries/"+dID+"/replay", nil), http.StatusConflict)
	r = b.do(b.keyA, http.MethodPost, "/v1/deliveries/"+dID+"/retry", nil)
	require.Equal(t, http.StatusAccepted, r.Status, "a pending delivery is retried, not replayed")
	require.Equal(t, dID, r.JSON(t)["id"])
	r = b.do(b.keyA, http.MethodPost, "/v1/endpoints/"+ep+"/replay", map[string]any{"status": "dead"})
	require.Equal(t, http.StatusAccepted, r.Status)
	require.EqualValues(t, 0, r.JSON(t)["queued"])
	r = b.do(b.keyA, http.MethodPost, "/v1/endpoints/"+ep+"/replay", nil)
	require.Equal(t, http.StatusAccepted, r.Status, "the filter is optional")
	r = b.do(b.keyA, http.MethodPost, "/v1/endpoints/"+ep+"/test", nil)
	require.Equal(t, http.StatusAccepted, r.Status)
	require.Equal(t, "sluice.test", r.JSON(t)["type"])

	r = b.do(b.keyA, http.MethodPost, "/v1/endpoints/"+ep+"/circuit/close", nil)
	require.Equal(t, http.StatusOK, r.Status, "closing a closed circuit is a no-op")
	require.Equal(t, "closed", r.JSON(t)["circuit"].(map[string]any)["state"])
	require.EqualValues(t, 3, r.JSON(t)["queued_deliveries"], "two order.* deliveries and a test event, none sent (no workers)")

	// Another tenant sees none of it.
	for _, path := range []string{"/v1/events/" + ev["id"].(string), "/v1/deliveries/" + dID} {
		requireProblem(t, b.do(b.keyB, http.MethodGet, path, nil), http.StatusNotFound)
	}
	for _, path := range []string{"/v1/deliveries/" + dID + "/replay", "/v1/deliveries/" + dID + "/retry", "/v1/endpoints/" + ep + "/replay", "/v1/endpoints/" + ep + "/test", "/v1/endpoints/" + ep + "/circuit/close"} {
		requireProblem(t, b.do(b.keyB, http.MethodPost, path, nil), http.StatusNotFound)
	}
	for _, path := range []string{"/v1/events", "/v1/deliveries", "/v1/deliveries?endpoint_id=" + ep, "/v1/deliveries?event_id=" + ev["id"].(string)} {
		require.Empty(t, b.do(b.keyB, http.MethodGet, path, nil).JSON(t)["data"], path)
	}
}

func TestEventBadInput(t *testing.T) {
	b := setup(t)
	ep := b.createEndpoint(b.keyA, nil)["id"].(string)
	cases := []struct {
		name, method, path string
		body               any
		status             int
	}{
		{"no type", http.MethodPost, "/v1/events", `{"payload":{}}`, 422},
		{"bad type", http.MethodPost, "/v1/events", `{"type":"a..b","payload":{}}`, 422},
		{"no payload", http.MethodPost, "/v1/events", `{"type":"a.b"}`, 422},
		{"null payload", http.MethodPost, "/v1/events", `{"type":"a.b","payload":null}`, 422},
		{"type not string", http.MethodPost, "/v1/events", `{"type":7,"payload":{}}`, 422},
		{"unknown field", http.MethodPost, "/v1/events", `{"type":"a","payload":{},"data":{}}`, 422},
		{"malformed", http.MethodPost, "/v1/events", `{"type":"a","payload":{`, 400},
		{"payload too large", http.MethodPost, "/v1/events", `{"type":"a","payload":{"s":"` + strings.Repeat("x", 257<<10) + `"}}`, 413},
		{"empty coalesce key", http.MethodPost, "/v1/events", `{"type":"a","payload":{},"coalesce_key":""}`, 422},
		{"batch not array", http.MethodPost, "/v1/events/batch", `{"events":{}}`, 422},
		{"batch missing", http.MethodPost, "/v1/events/batch", `{}`, 422},
		{"bad event id", http.MethodGet, "/v1/events/nope", nil, 404},
		{"unknown event", http.MethodGet, "/v1/events/" + uuid.NewString(), nil, 404},
		{"bad delivery id", http.MethodGet, "/v1/deliveries/1", nil, 404},
		{"bad status filter", http.MethodGet, "/v1/deliveries?status=lost", nil, 422},
		{"bad endpoint filter", http.MethodGet, "/v1/deliveries?endpoint_id=x", nil, 422},
		{"bad replay status", http.MethodPost, "/v1/endpoints/" + ep + "/replay", `{"status":"pending"}`, 422},
		{"failed is not replayed", http.MethodPost, "/v1/endpoints/" + ep + "/replay", `{"status":"failed"}`, 422},
		{"bad replay window", http.MethodPost, "/v1/endpoints/" + ep + "/replay", `{"since":"2026-01-02T00:00:00Z","until":"2026-01-01T00:00:00Z"}`, 422},
		{"bad replay time", http.MethodPost, "/v1/endpoints/" + ep + "/replay", `{"since":"yesterday"}`, 422},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			requireProblem(t, b.do(b.keyA, tc.method, tc.path, tc.body), tc.status)
		})
	}
	long := strings.Repeat("k", 256)
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/v1/events", strings.NewReader(`{"type":"a","payload":{}}`))
	req.Header.Set("Authorization", "Bearer "+b.keyA)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", long)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
}

// TestIdempotencyKeyReplaysTheSameJSON: the same Idempotency-Key with the
// payload spelled otherwise (members reordered, whitespace, 4200.0 and
// 4.2e3 for 4200) replays the first event; another payload is 409.
func TestIdempotencyKeyReplaysTheSameJSON(t *testing.T) {
	b := setup(t)
	post := func(body string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/v1/events", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+b.keyA)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "order-1042")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		return res
	}
	res := post(`{"type":"order.paid","payload":{"order_id":1042,"total":4200}}`)
	require.Equal(t, http.StatusAccepted, res.StatusCode)
	require.Empty(t, res.Header.Get("Idempotent-Replayed"))
	for _, same := range []string{
		`{"payload":{"total":4200,"order_id":1042},"type":"order.paid"}`,
		"{\"type\": \"order.paid\",\n \"payload\": { \"order_id\" : 1042 , \"total\" : 4200 } }",
		`{"type":"order.paid","payload":{"order_id":1042,"total":4200.0}}`,
		`{"type":"order.paid","payload":{"order_id":1042,"total":4.2e3}}`,
	} {
		res := post(same)
		require.Equal(t, http.StatusAccepted, res.StatusCode, same)
		require.Equal(t, "true", res.Header.Get("Idempotent-Replayed"), same)
	}
	require.Equal(t, http.StatusConflict, post(`{"type":"order.paid","payload":{"order_id":1042,"total":4201}}`).StatusCode)
	require.Len(t, b.do(b.keyA, http.MethodGet, "/v1/events", nil).JSON(t)["data"], 1, "the replays created nothing")
}

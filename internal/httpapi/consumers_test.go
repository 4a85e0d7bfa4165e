package httpapi_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/fanout"
)

// putConsumer creates (or updates) a consumer of the holder of key.
func (b *testBundle) putConsumer(key, uid string, body map[string]any) map[string]any {
	b.t.Helper()
	var in any // no body at all when body is nil
	if body != nil {
		in = body
	}
	r := b.do(key, http.MethodPut, "/v1/consumers/"+uid, in)
	require.Contains(b.t, []int{http.StatusOK, http.StatusCreated}, r.Status, string(r.Body))
	return r.JSON(b.t)
}

// subscribedEndpoint makes an endpoint (of consumer, when not empty)
// subscribed to every event type, and returns its id.
func (b *testBundle) subscribedEndpoint(key, consumer string) string {
	b.t.Helper()
	body := map[string]any{"url": "https://example.com/hook"}
	if consumer != "" {
		body["consumer"] = consumer
	}
	id := b.createEndpoint(key, body)["id"].(string)
	r := b.do(key, http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": id, "event_types": []string{"*"}})
	require.Equal(b.t, http.StatusCreated, r.Status, string(r.Body))
	return id
}

// fanOut posts events as the holder of key, fans them out by hand (these
// tests have no workers) and returns, per event, the endpoints it reached.
func (b *testBundle) fanOut(key string, events ...map[string]any) [][]string {
	b.t.Helper()
	r := b.do(key, http.MethodPost, "/v1/events/batch", map[string]any{"events": events})
	require.Equal(b.t, http.StatusAccepted, r.Status, string(r.Body))
	var ids []uuid.UUID
	for _, e := range r.JSON(b.t)["data"].([]any) {
		ids = append(ids, uuid.MustParse(e.(map[string]any)["id"].(string)))
	}
	_, _, err := fanout.Events(b.t.Context(), b.store, ids, nil)
	require.NoError(b.t, err)
	out := make([][]string, len(ids))
	for i, id := range ids {
		ev := b.do(key, http.MethodGet, "/v1/events/"+id.String(), nil).JSON(b.t)
		out[i] = []string{}
		for _, d := range ev["deliveries"].([]any) {
			out[i] = append(out[i], d.(map[string]any)["endpoint_id"].(string))
		}
	}
	return out
}

func TestConsumerRouting(t *testing.T) {
	b := setup(t)
	b.putConsumer(b.keyA, "cus_1", nil)
	b.putConsumer(b.keyA, "cus_2", nil)
	own := b.subscribedEndpoint(b.keyA, "")
	one := b.subscribedEndpoint(b.keyA, "cus_1")
	two := b.subscribedEndpoint(b.keyA, "cus_2")

	got := b.fanOut(b.keyA,
		map[string]any{"type": "invoice.paid", "payload": map[string]any{"n": 1}, "consumer": "cus_1"},
		map[string]any{"type": "invoice.paid", "payload": map[string]any{"n": 2}},
		map[string]any{"type": "invoice.paid", "payload": map[string]any{"n": 3}, "broadcast": true},
		map[string]any{"type": "invoice.paid", "payload": map[string]any{"n": 4}, "consumer": "cus_2"},
	)
	require.ElementsMatch(t, []string{one}, got[0], "a consumer's event reaches only its endpoints")
	require.ElementsMatch(t, []string{own}, got[1], "an event without consumer reaches only endpoints without one")
	require.ElementsMatch(t, []string{own, one, two}, got[2], "a broadcast reaches every endpoint")
	require.ElementsMatch(t, []string{two}, got[3])

	// The same rule holds for single posts.
	r := b.do(b.keyA, http.MethodPost, "/v1/events", map[string]any{"type": "x", "payload": map[string]any{}, "consumer": "cus_2"})
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	ev := r.JSON(t)
	require.Equal(t, "cus_2", ev["consumer"])
	_, _, err := fanout.Events(t.Context(), b.store, []uuid.UUID{uuid.MustParse(ev["id"].(string))}, nil)
	require.NoError(t, err)
	ds := b.do(b.keyA, http.MethodGet, "/v1/events/"+ev["id"].(string), nil).JSON(t)["deliveries"].([]any)
	require.Len(t, ds, 1)
	require.Equal(t, two, ds[0].(map[string]any)["endpoint_id"])

	// A test event goes to the endpoint and is addressed to its consumer.
	r = b.do(b.keyA, http.MethodPost, "/v1/endpoints/"+one+"/test", nil)
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	require.Equal(t, "cus_1", r.JSON(t)["consumer"])
}

func TestConsumerRoutingRefusals(t *testing.T) {
	b := setup(t)
	b.putConsumer(b.keyA, "cus_1", nil)
	b.putConsumer(b.keyB, "cus_b", nil)

	p := requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/events", map[string]any{"type": "x", "payload": map[string]any{}, "consumer": "nobody"}), http.StatusUnprocessableEntity)
	require.Contains(t, p["errors"].([]any)[0].(map[string]any)["field"], "consumer")
	p = requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/events", map[string]any{"type": "x", "payload": map[string]any{}, "consumer": "cus_b"}), http.StatusUnprocessableEntity)
	require.Equal(t, "consumer", p["errors"].([]any)[0].(map[string]any)["field"], "another tenant's consumer is unknown")
	p = requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/events/batch", map[string]any{"events": []any{
		map[string]any{"type": "x", "payload": map[string]any{}, "consumer": "cus_1"},
		map[string]any{"type": "x", "payload": map[string]any{}, "consumer": "ghost"},
	}}), http.StatusUnprocessableEntity)
	require.Equal(t, "events[1].consumer", p["errors"].([]any)[0].(map[string]any)["field"])
	requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/events", map[string]any{"type": "x", "payload": map[string]any{}, "consumer": "cus_1", "broadcast": true}), http.StatusUnprocessableEntity)
	requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/events", map[string]any{"type": "x", "payload": map[string]any{}, "consumer": "bad uid"}), http.StatusUnprocessableEntity)

	// Endpoints: an unknown (or foreign) consumer is 422, and a consumer
	// never changes.
	p = requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/endpoints", map[string]any{"url": "https://example.com/h", "consumer": "cus_b"}), http.StatusUnprocessableEntity)
	require.Equal(t, "consumer", p["errors"].([]any)[0].(map[string]any)["field"])
	own := b.createEndpoint(b.keyA, nil)["id"].(string)
	mine := b.createEndpoint(b.keyA, map[string]any{"url": "https://example.com/h", "consumer": "cus_1"})
	require.Equal(t, "cus_1", mine["consumer"])
	requireProblem(t, b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+own, map[string]any{"consumer": "cus_1"}), http.StatusUnprocessableEntity)
	b.putConsumer(b.keyA, "cus_2", nil)
	requireProblem(t, b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+mine["id"].(string), map[string]any{"consumer": "cus_2"}), http.StatusUnprocessableEntity)
	requireProblem(t, b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+mine["id"].(string), map[string]any{"consumer": nil}), http.StatusUnprocessableEntity)
	r := b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+mine["id"].(string), map[string]any{"consumer": "cus_1", "description": "same consumer"})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))

	list := b.do(b.keyA, http.MethodGet, "/v1/endpoints?consumer=cus_1", nil).JSON(t)["data"].([]any)
	require.Len(t, list, 1)
	require.Equal(t, mine["id"], list[0].(map[string]any)["id"])
	requireProblem(t, b.do(b.keyA, http.MethodGet, "/v1/endpoints?consumer=a%20b", nil), http.StatusUnprocessableEntity)
}

func TestConsumerLifecycle(t *testing.T) {
	b := setup(t)
	r := b.do(b.keyA, http.MethodPut, "/v1/consumers/cus_42", map[string]any{"name": "Initech", "alert_email": "ops@initech.test"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	c := r.JSON(t)
	require.Equal(t, "cus_42", c["uid"])
	require.Equal(t, "ops@initech.test", c["alert_email"])
	r = b.do(b.keyA, http.MethodPut, "/v1/consumers/cus_42", map[string]any{"name": "Initech Ltd"})
	require.Equal(t, http.StatusOK, r.Status)
	require.Nil(t, r.JSON(t)["alert_email"], "PUT replaces the whole consumer")
	r = b.do(b.keyA, http.MethodPut, "/v1/consumers/a.b_c:d-E", nil)
	require.Equal(t, http.StatusCreated, r.Status, "an empty body creates a consumer with no name")

	ep := b.subscribedEndpoint(b.keyA, "cus_42")
	got := b.do(b.keyA, http.MethodGet, "/v1/consumers/cus_42", nil).JSON(t)
	require.EqualValues(t, 1, got["endpoint_count"])
	require.Len(t, b.do(b.keyA, http.MethodGet, "/v1/consumers?limit=1", nil).JSON(t)["data"], 1)
	require.Len(t, b.do(b.keyA, http.MethodGet, "/v1/consumers", nil).JSON(t)["data"], 2)

	requireProblem(t, b.do(b.keyA, http.MethodPut, "/v1/consumers/cus_42", map[string]any{"alert_email": "not an address"}), http.StatusUnprocessableEntity)
	requireProblem(t, b.do(b.keyA, http.MethodPut, "/v1/consumers/cus_42", map[string]any{"name": strings.Repeat("n", 257)}), http.StatusUnprocessableEntity)
	requireProblem(t, b.do(b.keyA, http.MethodPut, "/v1/consumers/"+strings.Repeat("u", 65), nil), http.StatusNotFound)
	requireProblem(t, b.do(b.keyA, http.MethodPut, "/v1/consumers/cus_42", "name=x"), http.StatusBadRequest)

	// Deleting it takes its endpoints; its events stay.
	ev := b.fanOut(b.keyA, map[string]any{"type": "x", "payload": map[string]any{}, "consumer": "cus_42"})
	require.Equal(t, [][]string{{ep}}, ev)
	r = b.do(b.keyA, http.MethodDelete, "/v1/consumers/cus_42", nil)
	require.Equal(t, http.StatusNoContent, r.Status)
	requireProblem(t, b.do(b.keyA, http.MethodGet, "/v1/endpoints/"+ep, nil), http.StatusNotFound)
	requireProblem(t, b.do(b.keyA, http.MethodGet, "/v1/consumers/cus_42", nil), http.StatusNotFound)
	requireProblem(t, b.do(b.keyA, http.MethodDelete, "/v1/consumers/cus_42", nil), http.StatusNotFound)
	require.Len(t, b.do(b.keyA, http.MethodGet, "/v1/events", nil).JSON(t)["data"], 1)
}

// TestConsumerIsolation: another tenant's consumers answer exactly as ones
// that do not exist, on every consumer route, and a consumer uid is a
// tenant's own namespace.
func TestConsumerIsolation(t *testing.T) {
	b := setup(t)
	b.putConsumer(b.keyA, "shared", map[string]any{"name": "A's"})
	r := b.do(b.keyB, http.MethodPut, "/v1/consumers/shared", map[string]any{"name": "B's"})
	require.Equal(t, http.StatusCreated, r.Status, "the same uid is another tenant's own consumer")
	require.Equal(t, "A's", b.do(b.keyA, http.MethodGet, "/v1/consumers/shared", nil).JSON(t)["name"])
	b.putConsumer(b.keyA, "only-a", nil)
	for _, req := range []struct{ method, path string }{
		{http.MethodGet, "/v1/consumers/only-a"},
		{http.MethodDelete, "/v1/consumers/only-a"},
		{http.MethodPost, "/v1/consumers/only-a/portal"},
		{http.MethodPost, "/v1/consumers/only-a/portal/revoke"},
	} {
		requireProblem(t, b.do(b.keyB, req.method, req.path, nil), http.StatusNotFound)
	}
	require.Len(t, b.do(b.keyB, http.MethodGet, "/v1/consumers", nil).JSON(t)["data"], 1)
	require.Empty(t, b.do(b.keyB, http.MethodGet, "/v1/endpoints?consumer=only-a", nil).JSON(t)["data"])
	require.Equal(t, "A's", b.do(b.keyA, http.MethodGet, "/v1/consumers/shared", nil).JSON(t)["name"], "B's delete touched nothing of A's")
}

func TestPortalLink(t *testing.T) {
	b := setup(t)
	b.putConsumer(b.keyA, "cus_1", nil)
	r := b.do(b.keyA, http.MethodPost, "/v1/consumers/cus_1/portal", map[string]any{"ttl_seconds": 600, "read_only": true})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	link := r.JSON(t)
	u, err := url.Parse(link["url"].(string))
	require.NoError(t, err)
	require.Equal(t, "/portal", u.Path)
	require.NotEmpty(t, u.Query().Get("token"))
	require.NotEmpty(t, link["expires_at"])

	r = b.do(b.keyA, http.MethodPost, "/v1/consumers/cus_1/portal", nil)
	require.Equal(t, http.StatusCreated, r.Status, "the body is optional")
	for _, ttl := range []any{0, 7*24*3600 + 1, -5} {
		requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/consumers/cus_1/portal", map[string]any{"ttl_seconds": ttl}), http.StatusUnprocessableEntity)
	}
	requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/consumers/nobody/portal", nil), http.StatusNotFound)
	r = b.do(b.keyA, http.MethodPost, "/v1/consumers/cus_1/portal/revoke", nil)
	require.Equal(t, http.StatusNoContent, r.Status)
}

package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// The destination option through the API, each answer held to
// openapi.yaml: exclusive with url, its password never shown, a read
// sent back keeping it, a url turning the endpoint back into an HTTP one.
func TestDestinationFields(t *testing.T) {
	b := setup(t)
	ep := b.createEndpoint(b.keyA, map[string]any{"destination": map[string]any{
		"type": "redis", "url": "redis://app:pw@redis.example.com:6379/0", "stream": "hooks", "max_len": 1000}})
	id := ep["id"].(string)
	require.NotContains(t, ep, "url")
	dest := ep["destination"].(map[string]any)
	require.Equal(t, map[string]any{"type": "redis", "url": "redis://app@redis.example.com:6379/0",
		"password_set": true, "stream": "hooks", "max_len": float64(1000)}, dest)
	require.Nil(t, b.createEndpoint(b.keyA, map[string]any{"url": "https://example.com/plain"})["destination"])

	body, err := json.Marshal(map[string]any{"destination": dest})
	require.NoError(t, err)
	r := b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, string(body))
	require.Equal(t, http.StatusOK, r.Status, "a read sent back: %s", r.Body)
	require.Equal(t, dest, r.JSON(t)["destination"])

	for body, field := range map[string]string{
		`{"destination": "redis"}`: "destination",
		`{"destination": {"type": "redis", "url": "nats://redis.example.com", "stream": "s"}}`:                             "destination.url",
		`{"destination": {"type": "nats", "url": "nats://nats.example.com"}}`:                                              "destination.subject",
		`{"destination": {"type": "nats", "url": "nats://x.example.com", "subject": "s"}, "url": "https://example.com/x"}`: "url",
	} {
		requireField(t, b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, body), field)
	}

	r = b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, `{"url": "https://example.com/back"}`)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Nil(t, r.JSON(t)["destination"])
	require.Equal(t, "https://example.com/back", r.JSON(t)["url"])
}

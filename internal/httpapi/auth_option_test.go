package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// The auth option through the API, each answer held to openapi.yaml: the
// read shows client_secret_set, never the secret; a PATCH that sends the
// read back keeps the stored secret; every bad field is a 422 naming it,
// never a 5xx; null removes the option.
func TestAuthOptionFields(t *testing.T) {
	b := setup(t)
	ep := b.createEndpoint(b.keyA, map[string]any{"url": "https://example.com/oauth",
		"auth": map[string]string{"type": "oauth2_client_credentials", "token_url": "https://auth.example.com/token",
			"client_id": "sluice", "client_secret": "s3cret", "scope": "hooks"}})
	id := ep["id"].(string)
	authRead := ep["auth"].(map[string]any)
	require.Equal(t, map[string]any{"type": "oauth2_client_credentials", "token_url": "https://auth.example.com/token",
		"client_id": "sluice", "scope": "hooks", "client_secret_set": true}, authRead)
	require.Nil(t, b.createEndpoint(b.keyA, map[string]any{"url": "https://example.com/plain"})["auth"])

	body, err := json.Marshal(map[string]any{"auth": authRead})
	require.NoError(t, err)
	r := b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, string(body))
	require.Equal(t, http.StatusOK, r.Status, "a read sent back: %s", r.Body)
	require.Equal(t, authRead, r.JSON(t)["auth"])

	const ok = `"type": "oauth2_client_credentials", "client_id": "c", "client_secret": "s"`
	for body, field := range map[string]string{
		`{"auth": "on"}`: "auth",
		`{"auth": {"token_url": "https://auth.example.com/t", "client_id": "c"}}`: "auth.type",
		`{"auth": {"type": "oauth2_client_credentials", "token_url": 5}}`:         "auth",
		`{"auth": {` + ok + `}}`: "auth.token_url",
		`{"auth": {` + ok + `, "token_url": "https://169.254.169.254/t"}}`:                                                                  "auth.token_url",
		`{"auth": {` + ok + `, "token_url": "https://auth.example.com/t", "x": 1}}`:                                                         "auth",
		`{"auth": {"type": "oauth2_client_credentials", "token_url": "https://auth.example.com/t", "client_secret": "s"}}`:                  "auth.client_id",
		`{"auth": {"type": "oauth2_client_credentials", "token_url": "https://auth.example.com/t", "client_id": "c", "client_secret": ""}}`: "auth.client_secret",
	} {
		requireField(t, b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, body), field)
		var in map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &in))
		in["url"] = "https://example.com/new"
		raw, err := json.Marshal(in)
		require.NoError(t, err)
		requireField(t, b.do(b.keyA, http.MethodPost, "/v1/endpoints", string(raw)), field)
	}
	requireField(t, b.do(b.keyA, http.MethodPost, "/v1/endpoints", `{"url": "https://example.com/new", "auth": {"type": "oauth2_client_credentials", "token_url": "https://auth.example.com/t", "client_id": "c"}}`), "auth.client_secret")

	r = b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, `{"auth": null}`)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Nil(t, r.JSON(t)["auth"])
}

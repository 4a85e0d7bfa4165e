package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/testca"
)

func TestDeliveryOptionsFields(t *testing.T) {
	b := setup(t)
	plain := b.createEndpoint(b.keyA, map[string]any{"url": "https://example.com/plain"})
	require.Contains(t, plain, "timeout_seconds", "an option is shown, null for the default")
	require.Nil(t, plain["timeout_seconds"])
	require.Nil(t, plain["retry_schedule"])

	ep := b.createEndpoint(b.keyA, map[string]any{"url": "https://example.com/hooks",
		"timeout_seconds": 20, "retry_schedule": []string{"30s", "5m", "1h30m"}})
	id := ep["id"].(string)
	require.EqualValues(t, 20, ep["timeout_seconds"])
	require.Equal(t, []any{"30s", "5m0s", "1h30m0s"}, ep["retry_schedule"], "as Go prints a duration")

	patch := func(body string) map[string]any {
		r := b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, body)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		return r.JSON(t)
	}
	got := patch(`{"description": "kept options"}`)
	require.EqualValues(t, 20, got["timeout_seconds"], "PATCH keeps the options it does not name")
	got = patch(`{"timeout_seconds": null, "retry_schedule": []}`)
	require.Nil(t, got["timeout_seconds"], "null: the server's default again")
	require.Equal(t, []any{}, got["retry_schedule"])

	for body, field := range map[string]string{
		`{"timeout_seconds": 0}`:               "timeout_seconds",
		`{"timeout_seconds": 61}`:              "timeout_seconds",
		`{"timeout_seconds": 2.5}`:             "timeout_seconds",
		`{"timeout_seconds": "10"}`:            "timeout_seconds",
		`{"retry_schedule": "5s"}`:             "retry_schedule",
		`{"retry_schedule": ["5s", "later"]}`:  "retry_schedule",
		`{"retry_schedule": ["169h"]}`:         "retry_schedule",
		`{"retry_schedule": [{"wait": "5s"}]}`: "retry_schedule",
	} {
		requireField(t, b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, body), field)
	}
	requireField(t, b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, `{"Timeout_Seconds": 5}`), "Timeout_Seconds")
	r := b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, `{"timeout_seconds": 5, "timeout_seconds": 6}`)
	require.Equal(t, http.StatusBadRequest, r.Status, "a name given twice: %s", r.Body)
}

// The tls option through the API, each answer held to openapi.yaml: the
// read shows the certificate's subject and expiry, never the key; a
// PATCH that sends the read back keeps the stored key; null removes it.
func TestTLSOptionFields(t *testing.T) {
	b := setup(t)
	ca := testca.New(t, "clients")
	cert := ca.Issue(t, testca.Options{CommonName: "api-client", Client: true})
	ep := b.createEndpoint(b.keyA, map[string]any{"url": "https://example.com/mtls",
		"tls": map[string]string{"client_certificate": cert.PEM, "client_key": cert.KeyPEM, "ca_certificates": ca.PEM}})
	id := ep["id"].(string)
	tlsRead := ep["tls"].(map[string]any)
	require.Equal(t, "CN=api-client,O=Sluice tests", tlsRead["client_certificate_subject"])
	require.Equal(t, cert.NotAfter.Format(time.RFC3339), tlsRead["not_after"])
	require.NotContains(t, tlsRead, "client_key")
	require.Nil(t, b.createEndpoint(b.keyA, map[string]any{"url": "https://example.com/plain"})["tls"])

	body, err := json.Marshal(map[string]any{"tls": tlsRead})
	require.NoError(t, err)
	r := b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, string(body))
	require.Equal(t, http.StatusOK, r.Status, "a read sent back: %s", r.Body)
	require.Equal(t, tlsRead, r.JSON(t)["tls"])

	for body, field := range map[string]string{
		`{"tls": "on"}`: "tls",
		`{"tls": {"client_certificate": "PEM?"}}`:     "tls.client_certificate",
		`{"tls": {"client_key": "x"}}`:                "tls.client_certificate",
		`{"tls": {"client_certificate": 5}}`:          "tls",
		`{"tls": {"client_certificate": "", "x": 1}}`: "tls",
	} {
		requireField(t, b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, body), field)
	}

	r = b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, `{"tls": null}`)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Nil(t, r.JSON(t)["tls"])
}

// A poll endpoint refuses the options that act on a request Sluice sends
// (auth, tls, an Ed25519 signature), with a 422 naming each field, on
// create and on update; signature "v1" is its own.
func TestPollEndpointOptionsRefused(t *testing.T) {
	b := setup(t)
	ca := testca.New(t, "clients")
	cert := ca.Issue(t, testca.Options{CommonName: "poll-reader", Client: true})
	auth := map[string]string{"type": "oauth2_client_credentials", "token_url": "https://example.com/token",
		"client_id": "sluice", "client_secret": "s3cret"}
	tls := map[string]string{"client_certificate": cert.PEM, "client_key": cert.KeyPEM}

	r := b.do(b.keyA, http.MethodPost, "/v1/endpoints", map[string]any{"delivery": "poll", "auth": auth, "tls": tls, "signature": "v1,v1a"})
	for _, field := range []string{"auth", "tls", "signature"} {
		require.Contains(t, requireField(t, r, field), "poll endpoint")
	}
	ep := b.createEndpoint(b.keyA, map[string]any{"delivery": "poll", "signature": "v1"})
	id := ep["id"].(string)
	require.Equal(t, "v1", ep["signature"])
	for field, value := range map[string]any{"auth": auth, "tls": tls, "signature": "v1a"} {
		body, err := json.Marshal(map[string]any{field: value})
		require.NoError(t, err)
		requireField(t, b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, string(body)), field)
	}
}

package httpapi_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apirate"
)

// jwksBody is a JWKS as the API answers it.
type jwksBody struct {
	Keys []struct {
		Kty, Crv, X, Kid, Alg, Use string
	} `json:"keys"`
}

func (b *testBundle) jwks(tenant string) (jwksBody, response) {
	b.t.Helper()
	r := b.do("", http.MethodGet, "/.well-known/sluice/"+tenant+"/jwks.json", nil)
	var set jwksBody
	if r.Status == http.StatusOK {
		require.NoError(b.t, json.Unmarshal(r.Body, &set))
	}
	return set, r
}

// xOf is a public_key ("whpk_<base64 std>") as a JWK's x (base64url,
// unpadded).
func xOf(t *testing.T, publicKey string) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(publicKey, "whpk_"))
	require.NoError(t, err)
	require.Len(t, raw, 32)
	return base64.RawURLEncoding.EncodeToString(raw)
}

// getIfNoneMatch fetches path with If-None-Match, checked against the
// contract as b.do's requests are.
func (b *testBundle) getIfNoneMatch(path, etag string) (int, []byte) {
	t := b.t
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+path, nil)
	require.NoError(t, err)
	req.Header.Set("If-None-Match", etag)
	res, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	checkContract(t, req, nil, res, body)
	return res.StatusCode, body
}

func TestJWKS(t *testing.T) {
	b := setup(t)
	ep := b.createEndpoint(b.keyA, map[string]any{"url": "https://example.com/hook", "signature": "v1a"})
	require.Equal(t, "v1a", ep["signature"])
	id, public := ep["id"].(string), ep["public_key"].(string)
	plain := b.createEndpoint(b.keyA, nil)
	require.Nil(t, plain["signature"])
	require.NotContains(t, plain, "public_key")

	secret := b.do(b.keyA, http.MethodGet, "/v1/endpoints/"+id+"/secret", nil).JSON(t)
	require.Equal(t, public, secret["public_key"])
	require.NotContains(t, b.do(b.keyA, http.MethodGet, "/v1/endpoints/"+plain["id"].(string)+"/secret", nil).JSON(t), "public_key")

	set, r := b.jwks(b.tenantA.ID.String())
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Len(t, set.Keys, 1)
	k := set.Keys[0]
	require.Equal(t, []string{"OKP", "Ed25519", "EdDSA", "sig", id + ".1", xOf(t, public)}, []string{k.Kty, k.Crv, k.Alg, k.Use, k.Kid, k.X})
	require.Equal(t, "public, max-age=300", r.Header.Get("Cache-Control"))
	etag := r.Header.Get("ETag")
	require.NotEmpty(t, etag)

	// The ETag answers 304 while the set is the same, and changes with it.
	path := "/.well-known/sluice/" + b.tenantA.ID.String() + "/jwks.json"
	status, body := b.getIfNoneMatch(path, etag)
	require.Equal(t, http.StatusNotModified, status)
	require.Empty(t, body)
	status, _ = b.getIfNoneMatch(path, `"another"`)
	require.Equal(t, http.StatusOK, status)
	rotated := b.do(b.keyA, http.MethodPost, "/v1/endpoints/"+id+"/secret/rotate", nil).JSON(t)
	require.NotEqual(t, public, rotated["public_key"])
	set, r = b.jwks(b.tenantA.ID.String())
	require.Len(t, set.Keys, 2, "the previous key stays during the grace period")
	require.ElementsMatch(t, []string{id + ".1", id + ".2"}, []string{set.Keys[0].Kid, set.Keys[1].Kid})
	require.NotEqual(t, etag, r.Header.Get("ETag"))
	status, _ = b.getIfNoneMatch(path, etag)
	require.Equal(t, http.StatusOK, status)

	// Never another tenant's keys; an unknown tenant is not found.
	set, r = b.jwks(b.tenantB.ID.String())
	require.Equal(t, http.StatusOK, r.Status)
	require.Empty(t, set.Keys)
	require.JSONEq(t, `{"keys":[]}`, string(r.Body))
	_, r = b.jwks(uuid.NewString())
	requireProblem(t, r, http.StatusNotFound)
}

// TestJWKSAddressLimit: ids that name no tenant count against the client
// address as failed authentications do; past its limit they answer 429,
// while a tenant already served from here is still served.
func TestJWKSAddressLimit(t *testing.T) {
	b := setupWith(t, apirate.Config{Tenant: testRate,
		Auth: apirate.MustParse("1/m").WithBurst(2), AuthLookup: apirate.MustParse("1/m").WithBurst(1)})
	_, r := b.jwks(b.tenantA.ID.String())
	require.Equal(t, http.StatusOK, r.Status)
	for range 2 {
		_, r = b.jwks(uuid.NewString())
		requireProblem(t, r, http.StatusNotFound)
	}
	_, r = b.jwks("not-a-tenant")
	requireProblem(t, r, http.StatusTooManyRequests)
	_, r = b.jwks(uuid.NewString())
	requireProblem(t, r, http.StatusTooManyRequests)
	_, r = b.jwks(b.tenantA.ID.String())
	require.Equal(t, http.StatusOK, r.Status, "a tenant served from this address before")
	_, r = b.jwks(b.tenantB.ID.String())
	requireProblem(t, r, http.StatusTooManyRequests)
}

func TestSignatureField(t *testing.T) {
	b := setup(t)
	ep := b.createEndpoint(b.keyA, map[string]any{"url": "https://example.com/hooks", "signature": "v1,v1a"})
	id := ep["id"].(string)
	require.Equal(t, "v1,v1a", ep["signature"])
	require.True(t, strings.HasPrefix(ep["public_key"].(string), "whpk_"))
	for _, body := range []string{`{"signature": "v2"}`, `{"signature": "ed25519"}`, `{"signature": "v1a,v1"}`,
		`{"signature": ""}`, `{"signature": 1}`, `{"signature": ["v1a"]}`} {
		requireField(t, b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, body), "signature")
		requireField(t, b.do(b.keyA, http.MethodPost, "/v1/endpoints", `{"url": "https://example.com/x", `+body[1:]), "signature")
	}
	r := b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, `{"signature": null}`)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Nil(t, r.JSON(t)["signature"], "null: v1, the default")
	set, _ := b.jwks(b.tenantA.ID.String())
	require.Empty(t, set.Keys, "an endpoint back on v1 publishes no key")
}

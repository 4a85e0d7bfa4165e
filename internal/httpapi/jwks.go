package httpapi

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// JWKSPath is where a tenant's v1a public keys are published, under
// SLUICE_PUBLIC_URL, with no API key.
const JWKSPath = "/.well-known/sluice/{tenant_id}/jwks.json"

// jwksMaxAge is how long a JWKS may be cached: a receiver meeting a
// signature no cached key verifies fetches it again (docs/receiving.md).
const jwksMaxAge = 300

// jwk is an Ed25519 public key as RFC 8037 writes it in a JWK.
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

type jwks struct {
	Keys []jwk `json:"keys"`
}

// getJWKS serves GET /.well-known/sluice/{tenant_id}/jwks.json: the tenant's
// active v1a public keys (control.PublicKeys), an empty set when it has
// none. It needs no credential, so it is bounded as a credential's
// look-up is (readPoll): the tenant id counts as the credential, a tenant
// that does not exist answers 404 and costs the client's address a failed
// authentication, and past the address's limit only known tenants are
// looked up. The answer carries an ETag, the hash of its body, and
// answers 304 to a request that already holds it.
func (a *API) getJWKS(w http.ResponseWriter, r *http.Request) error {
	addr := apirate.ClientPrefix(r)
	text := chi.URLParam(r, "tenant_id")
	gate, res := a.limits.rate.GateAuth(addr, text)
	if gate == apirate.GateShut {
		return authThrottled(res)
	}
	keys, err := a.publicKeys(r, text)
	if errors.Is(err, sluice.ErrNotFound) {
		return a.notFoundByURL(addr, gate, "no tenant has this id")
	}
	if err != nil {
		return err
	}
	a.limits.rate.Verified(text)
	set := jwks{Keys: make([]jwk, len(keys))}
	for i, k := range keys {
		set.Keys[i] = jwk{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(k.Key),
			Kid: k.KID(), Alg: "EdDSA", Use: "sig"}
	}
	body, err := json.Marshal(set)
	if err != nil {
		return fmt.Errorf("encode jwks: %w", err)
	}
	sum := sha256.Sum256(body)
	etag := `"` + base64.RawURLEncoding.EncodeToString(sum[:16]) + `"`
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", fmt.Sprintf("public, max-age=%d", jwksMaxAge))
	if etagMatches(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	h.Set("Content-Type", "application/json")
	_, _ = w.Write(body)
	return nil
}

// publicKeys reads the keys of the tenant text names; an id that is not a
// UUID names no tenant.
func (a *API) publicKeys(r *http.Request, text string) ([]sluice.PublicKey, error) {
	tenant, err := uuid.Parse(text)
	if err != nil || tenant.String() != strings.ToLower(text) {
		return nil, sluice.ErrNotFound
	}
	return a.ctl.PublicKeys(r.Context(), tenant)
}

// etagMatches reports whether an If-None-Match header names etag (or is
// "*"), weakly compared as RFC 9110 §13.1.2 asks.
func etagMatches(header, etag string) bool {
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == etag || tag == "*" {
			return true
		}
	}
	return false
}

package app_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// jwksKey is a key of a tenant's JWKS, as a receiver reads it.
type jwksKey struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

// fetchJWKS is what a receiver does: GET the tenant's JWKS, with no API
// key, and return its raw body and its keys.
func (h *harness) fetchJWKS() ([]byte, []jwksKey) {
	h.t.Helper()
	res, err := http.Get(h.srv.URL + "/.well-known/sluice/" + h.tenant.ID.String() + "/jwks.json")
	require.NoError(h.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(h.t, err)
	require.Equal(h.t, http.StatusOK, res.StatusCode, string(raw))
	var set struct{ Keys []jwksKey }
	require.NoError(h.t, json.Unmarshal(raw, &set))
	return raw, set.Keys
}

// endpointKeys are the public keys of the JWKS whose kid names endpoint id.
func endpointKeys(t *testing.T, keys []jwksKey, id string) []ed25519.PublicKey {
	t.Helper()
	var out []ed25519.PublicKey
	for _, k := range keys {
		if !strings.HasPrefix(k.Kid, id+".") {
			continue
		}
		require.Equal(t, []string{"OKP", "Ed25519", "EdDSA", "sig"}, []string{k.Kty, k.Crv, k.Alg, k.Use})
		raw, err := base64.RawURLEncoding.DecodeString(k.X)
		require.NoError(t, err)
		require.Len(t, raw, ed25519.PublicKeySize)
		out = append(out, raw)
	}
	return out
}

// signatures are a delivery's webhook-signature entries by scheme ("v1",
// "v1a"), each decoded.
func signatures(t *testing.T, req receiver.Request) map[string][][]byte {
	t.Helper()
	out := map[string][][]byte{}
	for _, sig := range strings.Fields(req.Header.Get("webhook-signature")) {
		scheme, b64, ok := strings.Cut(sig, ",")
		require.True(t, ok, sig)
		raw, err := base64.StdEncoding.DecodeString(b64)
		require.NoError(t, err)
		out[scheme] = append(out[scheme], raw)
	}
	return out
}

// verifiesV1a reports whether a v1a signature of req verifies with one of
// keys: the receiver's check (Standard Webhooks accepts any signature that
// verifies), in the standard library alone.
func verifiesV1a(t *testing.T, req receiver.Request, keys []ed25519.PublicKey) bool {
	t.Helper()
	msg := []byte(req.ID + "." + req.Header.Get("webhook-timestamp") + "." + string(req.Body))
	for _, sig := range signatures(t, req)["v1a"] {
		for _, key := range keys {
			if ed25519.Verify(key, msg, sig) {
				return true
			}
		}
	}
	return false
}

// A receiver verifies v1a deliveries with the keys it fetched from the
// tenant's JWKS, by their kid; v1 and v1a sign side by side; a rotation
// signs with both key pairs and publishes both; and a third-party Ed25519
// implementation (Python's cryptography) verifies the same delivery.
func TestV1aVerifiedWithJWKS(t *testing.T) {
	h := start(t, nil)
	both, plain, alone := receiver.New(t), receiver.New(t), receiver.New(t)
	bothID, _ := h.endpoint(both, []string{"sig.*"}, map[string]any{"signature": "v1,v1a"})
	h.endpoint(plain, []string{"sig.*"}, nil)
	aloneID, _ := h.endpoint(alone, []string{"sig.*"}, map[string]any{"signature": "v1a"})

	h.post("sig.one", map[string]any{"n": 1, "text": "héllo"})
	for _, rcv := range []*receiver.Receiver{both, plain, alone} {
		require.True(t, rcv.Await(20*time.Second, func(reqs []receiver.Request) bool { return len(reqs) == 1 }), "one delivery each")
	}
	_, keys := h.fetchJWKS()
	require.Len(t, keys, 2, "one key per v1a endpoint, none for the plain one")

	d := both.Requests()[0]
	require.True(t, d.Verified, "v1 still verifies with the secret")
	require.Len(t, signatures(t, d)["v1"], 1)
	require.Len(t, signatures(t, d)["v1a"], 1)
	require.True(t, verifiesV1a(t, d, endpointKeys(t, keys, bothID)))
	require.False(t, verifiesV1a(t, d, endpointKeys(t, keys, aloneID)), "another endpoint's key does not verify it")

	d = plain.Requests()[0]
	require.True(t, d.Verified)
	require.NotContains(t, d.Header.Get("webhook-signature"), "v1a,", "a v1 endpoint signs as before")

	d = alone.Requests()[0]
	require.False(t, d.Verified, "v1a alone: no v1 signature")
	require.NotContains(t, signatures(t, d), "v1")
	require.True(t, verifiesV1a(t, d, endpointKeys(t, keys, aloneID)))
	tampered := d
	tampered.Body = []byte(strings.Replace(string(d.Body), `"n":1`, `"n":2`, 1))
	require.NotEqual(t, d.Body, tampered.Body)
	require.False(t, verifiesV1a(t, tampered, endpointKeys(t, keys, aloneID)))

	// A rotation: deliveries carry a signature of each key pair once the
	// endpoint's run reads it again (within a second, as any change), and
	// the JWKS lists both. An event is posted whenever the last one has
	// arrived, until one arrives signed twice.
	h.call(http.MethodPost, "/v1/endpoints/"+aloneID+"/secret/rotate", nil, http.StatusOK, nil)
	posted := 1
	eventually(t, 20*time.Second, func() bool {
		reqs := alone.Requests()
		if len(reqs) < posted {
			return false
		}
		if last := reqs[len(reqs)-1]; len(reqs) > 1 && len(signatures(t, last)["v1a"]) == 2 {
			d = last
			return true
		}
		require.Less(t, posted, 200, "at most 200 events")
		h.post("sig.two", map[string]any{"n": posted})
		posted++
		return false
	}, "a delivery signed with both key pairs (%v events posted)", lazy(func() any { return posted }))
	for _, r := range alone.Requests()[1:] {
		require.NotEmpty(t, signatures(t, r)["v1a"])
	}
	jwks, keys := h.fetchJWKS()
	rotated := endpointKeys(t, keys, aloneID)
	require.Len(t, rotated, 2)
	for _, key := range rotated {
		require.True(t, verifiesV1a(t, d, []ed25519.PublicKey{key}), "each key verifies one of the signatures")
	}

	verifyWithPython(t, jwks, aloneID, d, tampered)
}

// verifyV1aPy verifies a delivery's v1a signature with Python's
// cryptography package, reading the key from the JWKS by kid: exit 0 when
// a signature verifies, 1 when none does.
const verifyV1aPy = `
import base64, json, sys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.exceptions import InvalidSignature
jwks, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
msg = (d["id"] + "." + d["timestamp"] + ".").encode() + base64.b64decode(d["body"])
sigs = [base64.b64decode(s[4:]) for s in d["signature"].split() if s.startswith("v1a,")]
for k in jwks["keys"]:
    if not k["kid"].startswith(d["endpoint"] + ".") or k["kty"] != "OKP" or k["crv"] != "Ed25519":
        continue
    key = Ed25519PublicKey.from_public_bytes(base64.urlsafe_b64decode(k["x"] + "=" * (-len(k["x"]) % 4)))
    for s in sigs:
        try:
            key.verify(s, msg)
            print("verified with", k["kid"])
            sys.exit(0)
        except InvalidSignature:
            pass
print("no v1a signature verified")
sys.exit(1)
`

// verifyWithPython checks good verifies, and bad does not, with a
// third-party Ed25519 implementation; skipped without python3 and its
// cryptography package.
func verifyWithPython(t *testing.T, jwks []byte, endpointID string, good, bad receiver.Request) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the third-party Ed25519 check is skipped")
	}
	if out, err := exec.Command(python, "-c", "import cryptography").CombinedOutput(); err != nil {
		t.Skipf("python3 has no cryptography package (%v: %s): the third-party Ed25519 check is skipped", err, out)
	}
	dir := t.TempDir()
	write := func(name string, v any) string {
		raw, err := json.Marshal(v)
		require.NoError(t, err)
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, raw, 0o600))
		return path
	}
	script := filepath.Join(dir, "verify.py")
	require.NoError(t, os.WriteFile(script, []byte(verifyV1aPy), 0o600))
	jwksPath := filepath.Join(dir, "jwks.json")
	require.NoError(t, os.WriteFile(jwksPath, jwks, 0o600))
	for i, tc := range []struct {
		d    receiver.Request
		pass bool
	}{{good, true}, {bad, false}} {
		_, err := strconv.ParseInt(tc.d.Header.Get("webhook-timestamp"), 10, 64)
		require.NoError(t, err)
		delivery := write("delivery"+strconv.Itoa(i)+".json", map[string]string{
			"id": tc.d.ID, "timestamp": tc.d.Header.Get("webhook-timestamp"), "endpoint": endpointID,
			"signature": tc.d.Header.Get("webhook-signature"), "body": base64.StdEncoding.EncodeToString(tc.d.Body),
		})
		out, err := exec.Command(python, script, jwksPath, delivery).CombinedOutput()
		if tc.pass {
			require.NoError(t, err, "python's cryptography verifies the delivery: %s", out)
			require.Contains(t, string(out), "verified with "+endpointID+".")
		} else {
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "%s", out)
			require.Equal(t, 1, exit.ExitCode(), "python refuses the tampered delivery: %s", out)
		}
	}
}

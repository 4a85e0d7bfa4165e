package control_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// publicKey decodes a public_key ("whpk_<base64>").
func publicKey(t *testing.T, text string) ed25519.PublicKey {
	t.Helper()
	b64, ok := strings.CutPrefix(text, "whpk_")
	require.True(t, ok, "public key %q", text)
	raw, err := base64.StdEncoding.DecodeString(b64)
	require.NoError(t, err)
	require.Len(t, raw, ed25519.PublicKeySize)
	return raw
}

// kids are the JWKS key ids of keys, with each key by kid.
func kids(keys []sluice.PublicKey) map[string][]byte {
	out := map[string][]byte{}
	for _, k := range keys {
		out[k.KID()] = k.Key
	}
	return out
}

func TestSignatureOption(t *testing.T) {
	t.Parallel()
	b := setupEndpoints(t)
	ctx := context.Background()
	ep := b.create(t, b.owner, control.EndpointInput{}).Endpoint
	for _, bad := range []string{`"v2"`, `"V1A"`, `"v1a,v1"`, `"v1, v1a"`, `""`, `1`, `["v1a"]`} {
		_, err := b.ctl.CreateEndpoint(ctx, b.owner, control.EndpointInput{URL: new("http://127.0.0.1:9/x"), Options: options("signature", bad)})
		require.Equal(t, []string{"signature"}, fields(t, err), bad)
		_, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("signature", bad)})
		require.Equal(t, []string{"signature"}, fields(t, err), bad)
	}
	keys, err := b.ctl.PublicKeys(ctx, b.f.TenantA.ID)
	require.NoError(t, err)
	require.Empty(t, keys, "refused options made no key pair")

	for _, good := range []string{"v1", "v1a", "v1,v1a"} {
		got, err := b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("signature", `"`+good+`"`)})
		require.NoError(t, err)
		require.Equal(t, good, *got.Signature)
		require.Equal(t, []string{"signature"}, b.auditLog(t, b.owner)[0].Changed)
	}
	got, err := b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("signature", "null")})
	require.NoError(t, err)
	require.True(t, got.DeliveryOptions.IsZero(), "null is v1, the default")
	require.True(t, got.SignsV1() && !got.SignsV1a())
}

func TestPublicKeys(t *testing.T) {
	t.Parallel()
	b := setupEndpoints(t)
	ctx := context.Background()
	var now atomic.Pointer[time.Time]
	now.Store(new(time.Now()))
	ctl := control.New(control.Config{Store: b.f.Store, Nudger: b.nudges, AllowPrivateTargets: true,
		PublicURL: "https://sluice.test/", Now: func() time.Time { return *now.Load() }})

	plain, err := ctl.CreateEndpoint(ctx, b.owner, control.EndpointInput{URL: new("http://127.0.0.1:9/plain")})
	require.NoError(t, err)
	require.Empty(t, plain.PublicKey, "a v1 endpoint has no key pair")
	keys, err := ctl.PublicKeys(ctx, b.f.TenantA.ID)
	require.NoError(t, err)
	require.Empty(t, keys, "a tenant without v1a endpoints has an empty set")

	created, err := ctl.CreateEndpoint(ctx, b.owner, control.EndpointInput{URL: new("http://127.0.0.1:9/v1a"), Options: options("signature", `"v1a"`)})
	require.NoError(t, err)
	id := created.Endpoint.ID
	first := publicKey(t, created.PublicKey)
	keys, err = ctl.PublicKeys(ctx, b.f.TenantA.ID)
	require.NoError(t, err)
	require.Equal(t, map[string][]byte{id.String() + ".1": first}, kids(keys))

	revealed, err := ctl.RevealEndpointSecret(ctx, b.owner, id)
	require.NoError(t, err)
	require.Equal(t, created.PublicKey, revealed.PublicKey, "the secret's reveal shows the public key")
	revealed, err = ctl.RevealEndpointSecret(ctx, b.owner, plain.Endpoint.ID)
	require.NoError(t, err)
	require.Empty(t, revealed.PublicKey)

	// Never another tenant's keys; a tenant that does not exist is not found.
	keys, err = ctl.PublicKeys(ctx, b.f.TenantB.ID)
	require.NoError(t, err)
	require.Empty(t, keys)
	_, err = ctl.PublicKeys(ctx, uuid.New())
	require.ErrorIs(t, err, sluice.ErrNotFound)

	// A rotation keeps the previous key in the set for the grace period.
	rotated, err := ctl.RotateEndpointSecret(ctx, b.owner, id)
	require.NoError(t, err)
	second := publicKey(t, rotated.PublicKey)
	require.NotEqual(t, first, second)
	keys, err = ctl.PublicKeys(ctx, b.f.TenantA.ID)
	require.NoError(t, err)
	require.Equal(t, map[string][]byte{id.String() + ".1": first, id.String() + ".2": second}, kids(keys))
	now.Store(new(now.Load().Add(control.SecretGrace - time.Second)))
	keys, err = ctl.PublicKeys(ctx, b.f.TenantA.ID)
	require.NoError(t, err)
	require.Len(t, keys, 2, "still in grace")
	now.Store(new(now.Load().Add(time.Second)))
	keys, err = ctl.PublicKeys(ctx, b.f.TenantA.ID)
	require.NoError(t, err)
	require.Equal(t, map[string][]byte{id.String() + ".2": second}, kids(keys), "grace over: the new key alone")

	// Rotating a v1 endpoint makes no key pair.
	rotated, err = ctl.RotateEndpointSecret(ctx, b.owner, plain.Endpoint.ID)
	require.NoError(t, err)
	require.Empty(t, rotated.PublicKey)

	// Stopping v1a takes the key pair away; starting again makes a new one.
	_, err = ctl.UpdateEndpoint(ctx, b.owner, id, control.EndpointInput{Options: options("signature", `"v1"`)})
	require.NoError(t, err)
	keys, err = ctl.PublicKeys(ctx, b.f.TenantA.ID)
	require.NoError(t, err)
	require.Empty(t, keys)
	_, err = ctl.UpdateEndpoint(ctx, b.owner, id, control.EndpointInput{Options: options("signature", `"v1,v1a"`)})
	require.NoError(t, err)
	revealed, err = ctl.RevealEndpointSecret(ctx, b.owner, id)
	require.NoError(t, err)
	third := publicKey(t, revealed.PublicKey)
	require.NotEqual(t, second, third)
	keys, err = ctl.PublicKeys(ctx, b.f.TenantA.ID)
	require.NoError(t, err)
	require.Equal(t, map[string][]byte{id.String() + ".3": third}, kids(keys))

	// A change that keeps v1a keeps the key pair.
	_, err = ctl.UpdateEndpoint(ctx, b.owner, id, control.EndpointInput{Options: options("signature", `"v1a"`)})
	require.NoError(t, err)
	keys, err = ctl.PublicKeys(ctx, b.f.TenantA.ID)
	require.NoError(t, err)
	require.Equal(t, map[string][]byte{id.String() + ".3": third}, kids(keys))
}

package control

import (
	"context"
	"crypto/ed25519"
	"fmt"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// PublicKeys are the v1a public keys of a tenant's JWKS: the current key
// of each endpoint that signs v1a, and the keys a rotation put aside while
// they still sign, in their grace period. It needs no caller: public keys
// are published to anyone, and only this tenant's are read. A tenant that
// does not exist is sluice.ErrNotFound.
func (c *Control) PublicKeys(ctx context.Context, tenantID uuid.UUID) ([]sluice.PublicKey, error) {
	keys, err := c.store.TenantPublicKeys(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("public keys: %w", err)
	}
	now := c.now()
	out := make([]sluice.PublicKey, 0, len(keys))
	for _, k := range keys {
		if k.Expires == nil || now.Before(*k.Expires) {
			out = append(out, k.PublicKey)
		}
	}
	return out, nil
}

// setSigningKey gives an endpoint that starts signing v1a (its options
// were before and are now after) a new key pair, and takes it from one
// that stops, in the change's transaction; it returns the new public key
// (send.PublicKeyText), "" when it made none.
func (c *Control) setSigningKey(ctx context.Context, who Caller, id uuid.UUID, before, after sluice.DeliveryOptions) (string, error) {
	switch {
	case after.SignsV1a() && !before.SignsV1a():
		key := send.NewSigningKey()
		if err := c.store.SetEndpointSigningKey(ctx, who.Tenant, id, key); err != nil {
			return "", err
		}
		return send.PublicKeyText(key.Public().(ed25519.PublicKey)), nil
	case before.SignsV1a() && !after.SignsV1a():
		return "", c.store.SetEndpointSigningKey(ctx, who.Tenant, id, nil)
	}
	return "", nil
}

package store

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// SetEndpointSigningKey gives an endpoint the v1a key pair key, its
// private half sealed, as the next version; nil takes its key pair away.
func (s *Store) SetEndpointSigningKey(ctx context.Context, tenantID, id uuid.UUID, key ed25519.PrivateKey) error {
	p := dbq.SetEndpointSigningKeyParams{TenantID: tenantID, ID: id}
	p.SignKeyEnc, p.SignPublicKey = s.sealKey(key)
	return ExecRows(ctx, s, (*dbq.Queries).SetEndpointSigningKey, p)
}

// RotateEndpointSigningKey makes key, its private half sealed, an
// endpoint's key pair; the current one keeps signing beside it until the
// secret's previous one expires: call it in the transaction of
// RotateEndpointSecret.
func (s *Store) RotateEndpointSigningKey(ctx context.Context, tenantID, id uuid.UUID, key ed25519.PrivateKey) error {
	p := dbq.RotateEndpointSigningKeyParams{TenantID: tenantID, ID: id}
	p.SignKeyEnc, p.SignPublicKey = s.sealKey(key)
	return ExecRows(ctx, s, (*dbq.Queries).RotateEndpointSigningKey, p)
}

// sealKey is the columns of key pair key: its sealed seed and its public
// key; nil for none.
func (s *Store) sealKey(key ed25519.PrivateKey) (sealed, public []byte) {
	if key == nil {
		return nil, nil
	}
	return s.box.Seal(key.Seed()), key.Public().(ed25519.PublicKey)
}

// TenantPublicKey is a public key TenantPublicKeys found, with when it
// stops signing: nil for an endpoint's current key.
type TenantPublicKey struct {
	sluice.PublicKey
	Expires *time.Time
}

// TenantPublicKeys returns the public keys of a tenant's endpoints, the
// current and the previous ones, in one indexed read. A tenant that does
// not exist is sluice.ErrNotFound.
func (s *Store) TenantPublicKeys(ctx context.Context, tenantID uuid.UUID) ([]TenantPublicKey, error) {
	rows, err := s.q.TenantPublicKeys(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("read public keys: %w", err)
	}
	if len(rows) == 0 {
		return nil, sluice.ErrNotFound
	}
	var out []TenantPublicKey
	for _, r := range rows {
		if r.ID == nil {
			continue // the tenant has none
		}
		v := int(deref(r.SignKeyVersion))
		out = append(out, TenantPublicKey{PublicKey: sluice.PublicKey{EndpointID: *r.ID, Version: v, Key: r.SignPublicKey}})
		if r.PreviousSignPublicKey != nil {
			out = append(out, TenantPublicKey{
				PublicKey: sluice.PublicKey{EndpointID: *r.ID, Version: v - 1, Key: r.PreviousSignPublicKey},
				Expires:   r.PreviousSecretExpiresAt,
			})
		}
	}
	return out, nil
}

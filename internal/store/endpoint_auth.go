package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// SetEndpointAuth saves an endpoint's auth option as written: secret, its
// client secret, sealed (nil keeps the stored one), and no token.
func (s *Store) SetEndpointAuth(ctx context.Context, id uuid.UUID, secret []byte) error {
	var sealed []byte
	if secret != nil {
		sealed = s.box.Seal(secret)
	}
	err := s.q.SetEndpointAuth(ctx, dbq.SetEndpointAuthParams{EndpointID: id, SecretEnc: sealed})
	return authErr("set endpoint auth", err)
}

// DeleteEndpointAuth removes an endpoint's client secret and token, with
// its auth option.
func (s *Store) DeleteEndpointAuth(ctx context.Context, id uuid.UUID) error {
	return authErr("delete endpoint auth", s.q.DeleteEndpointAuth(ctx, id))
}

// EndpointAuthSecretSet reports whether an endpoint has a client secret.
func (s *Store) EndpointAuthSecretSet(ctx context.Context, id uuid.UUID) (bool, error) {
	set, err := s.q.EndpointAuthSecretSet(ctx, id)
	return set, authErr("read endpoint auth", err)
}

// SealSecret seals a secret (an endpoint's access token) as the store
// seals its own; OpenSecret opens it.
func (s *Store) SealSecret(plain []byte) []byte { return s.box.Seal(plain) }

// authErr wraps err, if any, with what the store was doing.
func authErr(doing string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", doing, err)
	}
	return nil
}

package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// SetEndpointTLSKey seals key, a PEM private key, as the client key of an
// endpoint's tls option; nil removes it, with the option.
func (s *Store) SetEndpointTLSKey(ctx context.Context, tenantID, id uuid.UUID, key []byte) error {
	var sealed []byte
	if key != nil {
		sealed = s.box.Seal(key)
	}
	return ExecRows(ctx, s, (*dbq.Queries).SetEndpointTLSKey, dbq.SetEndpointTLSKeyParams{TenantID: tenantID, ID: id, TlsKeyEnc: sealed})
}

// EndpointTLSKey is the client key of an endpoint's tls option, nil when
// it has none.
func (s *Store) EndpointTLSKey(ctx context.Context, tenantID, id uuid.UUID) ([]byte, error) {
	sealed, err := s.q.EndpointTLSKey(ctx, dbq.EndpointTLSKeyParams{TenantID: tenantID, ID: id})
	if err != nil {
		return nil, fmt.Errorf("read endpoint tls key: %w", NotFound(err))
	}
	if sealed == nil {
		return nil, nil
	}
	key, err := s.box.Open(sealed)
	if err != nil {
		return nil, fmt.Errorf("open endpoint tls key: %w", err)
	}
	return key, nil
}

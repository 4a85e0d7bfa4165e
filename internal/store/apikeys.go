package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// CreateAPIKey adds an API key to a tenant: its digest, never the key.
// An unknown tenant is sluice.ErrNotFound.
func (s *Store) CreateAPIKey(ctx context.Context, tenantID uuid.UUID, p sluice.NewAPIKeyParams, key sluice.KeyDigest) (sluice.APIKey, error) {
	k, err := createAPIKey(ctx, s.q, tenantID, p, key)
	return k, NotFound(err) // the tenant's foreign key
}

func createAPIKey(ctx context.Context, q *dbq.Queries, tenantID uuid.UUID, p sluice.NewAPIKeyParams, key sluice.KeyDigest) (sluice.APIKey, error) {
	row, err := q.CreateAPIKey(ctx, dbq.CreateAPIKeyParams{
		ID:        NewID(),
		TenantID:  tenantID,
		Name:      p.Name,
		Prefix:    key.Prefix,
		KeyHash:   key.Hash,
		ExpiresAt: p.ExpiresAt,
	})
	if err != nil {
		return sluice.APIKey{}, fmt.Errorf("create api key: %w", err)
	}
	return apiKeyFromRow(row), nil
}

// ListAPIKeys returns a page of a tenant's API keys, newest first; expired
// keys are listed until they are revoked.
func (s *Store) ListAPIKeys(ctx context.Context, tenantID uuid.UUID, p sluice.PageParams) (sluice.Page[sluice.APIKey], error) {
	rows, err := s.q.ListAPIKeys(ctx, dbq.ListAPIKeysParams{TenantID: tenantID, After: p.After, MaxRows: limitRows(p)})
	if err != nil {
		return sluice.Page[sluice.APIKey]{}, fmt.Errorf("list api keys: %w", err)
	}
	return Page(rows, p, func(r dbq.ApiKey) uuid.UUID { return r.ID },
		func(r dbq.ApiKey) (sluice.APIKey, error) { return apiKeyFromRow(r), nil })
}

// GetAPIKey returns one of a tenant's API keys (never the key itself).
func (s *Store) GetAPIKey(ctx context.Context, tenantID, id uuid.UUID) (sluice.APIKey, error) {
	row, err := s.q.GetAPIKey(ctx, dbq.GetAPIKeyParams{TenantID: tenantID, ID: id})
	if err != nil {
		return sluice.APIKey{}, NotFound(err)
	}
	return apiKeyFromRow(row), nil
}

// RevokeAPIKeyByID is RevokeAPIKey for an operator, who names the key
// alone; it returns the key revoked and its tenant's id.
func (s *Store) RevokeAPIKeyByID(ctx context.Context, id uuid.UUID) (sluice.APIKey, uuid.UUID, error) {
	row, err := s.q.DeleteAPIKeyByID(ctx, id)
	if err != nil {
		return sluice.APIKey{}, uuid.Nil, NotFound(err)
	}
	return apiKeyFromRow(row), row.TenantID, nil
}

// AuthenticateAPIKey resolves an API key, by its hash, to what it
// authenticates as. A key that does not exist, was revoked or has expired is
// sluice.ErrNotFound; a disabled tenant's key resolves, with
// Tenant.DisabledAt set, for the caller to refuse. It records the key's use, at most once a minute.
func (s *Store) AuthenticateAPIKey(ctx context.Context, keyHash []byte) (sluice.Credential, error) {
	row, err := s.q.AuthenticateAPIKey(ctx, keyHash)
	if err != nil {
		return sluice.Credential{}, NotFound(err)
	}
	return sluice.Credential{
		Tenant:     tenantFromRow(row.Tenant),
		APIKeyID:   row.ApiKeyID,
		APIKeyName: row.ApiKeyName,
		ExpiresAt:  row.KeyExpiresAt,
		APIRate:    row.Tenant.ApiRate,
	}, nil
}

func apiKeyFromRow(r dbq.ApiKey) sluice.APIKey {
	return sluice.APIKey{
		ID: r.ID, Name: r.Name, Prefix: r.Prefix,
		LastUsedAt: r.LastUsedAt, ExpiresAt: r.ExpiresAt, CreatedAt: r.CreatedAt,
	}
}

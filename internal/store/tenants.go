package store

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// CreateTenant creates a tenant and its first API key, returning the key in
// plaintext: the only time it is ever seen.
func (s *Store) CreateTenant(ctx context.Context, name, alertEmail string) (sluice.Tenant, string, error) {
	var (
		tenant sluice.Tenant
		key    string
	)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		row, err := q.CreateTenant(ctx, dbq.CreateTenantParams{ID: newID(), Name: name, AlertEmail: alertEmail})
		if err != nil {
			return err
		}
		tenant = tenantFromRow(row)
		key, err = createAPIKey(ctx, q, tenant.ID)
		return err
	})
	return tenant, key, err
}

// CreateAPIKey adds an API key to a tenant and returns it in plaintext.
func (s *Store) CreateAPIKey(ctx context.Context, tenantID uuid.UUID) (string, error) {
	if _, err := s.q.GetTenant(ctx, tenantID); err != nil {
		return "", notFound(err)
	}
	return createAPIKey(ctx, s.q, tenantID)
}

func createAPIKey(ctx context.Context, q *dbq.Queries, tenantID uuid.UUID) (string, error) {
	key := apikey.New()
	err := q.CreateAPIKey(ctx, dbq.CreateAPIKeyParams{
		ID:       newID(),
		TenantID: tenantID,
		Prefix:   apikey.DisplayPrefix(key),
		KeyHash:  apikey.Hash(key),
	})
	return key, err
}

// TenantByAPIKey resolves a plaintext API key to its tenant.
func (s *Store) TenantByAPIKey(ctx context.Context, key string) (sluice.Tenant, error) {
	row, err := s.q.TenantByAPIKeyHash(ctx, apikey.Hash(key))
	if err != nil {
		return sluice.Tenant{}, notFound(err)
	}
	return tenantFromRow(row), nil
}

// GetTenant returns one tenant.
func (s *Store) GetTenant(ctx context.Context, id uuid.UUID) (sluice.Tenant, error) {
	row, err := s.q.GetTenant(ctx, id)
	if err != nil {
		return sluice.Tenant{}, notFound(err)
	}
	return tenantFromRow(row), nil
}

func tenantFromRow(r dbq.Tenant) sluice.Tenant {
	return sluice.Tenant{ID: r.ID, Name: r.Name, AlertEmail: r.AlertEmail, CreatedAt: r.CreatedAt}
}

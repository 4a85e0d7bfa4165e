package store

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

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
		k, err := createAPIKey(ctx, q, tenant.ID, sluice.NewAPIKeyParams{Name: "default"})
		key = k.Key
		return err
	})
	return tenant, key, err
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

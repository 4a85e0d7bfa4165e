package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// CreateTenant creates a tenant with its first API key, "default", of
// which it keeps the digest.
func (s *Store) CreateTenant(ctx context.Context, name, alertEmail string, key sluice.KeyDigest) (sluice.Tenant, error) {
	var tenant sluice.Tenant
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		row, err := q.CreateTenant(ctx, dbq.CreateTenantParams{ID: NewID(), Name: name, AlertEmail: alertEmail})
		if err != nil {
			return fmt.Errorf("create tenant: %w", err)
		}
		tenant = tenantFromRow(row)
		_, err = createAPIKey(ctx, q, tenant.ID, sluice.NewAPIKeyParams{Name: "default"}, key)
		return err
	})
	return tenant, err
}

// GetTenant returns one tenant.
func (s *Store) GetTenant(ctx context.Context, id uuid.UUID) (sluice.Tenant, error) {
	row, err := s.q.GetTenant(ctx, id)
	if err != nil {
		return sluice.Tenant{}, NotFound(err)
	}
	return tenantFromRow(row), nil
}

// ListTenants returns a page of every tenant, newest first: for operators.
func (s *Store) ListTenants(ctx context.Context, p sluice.PageParams) (sluice.Page[sluice.Tenant], error) {
	rows, err := s.q.ListTenants(ctx, dbq.ListTenantsParams{After: p.After, MaxRows: limitRows(p)})
	if err != nil {
		return sluice.Page[sluice.Tenant]{}, fmt.Errorf("list tenants: %w", err)
	}
	return Page(rows, p, func(r dbq.Tenant) uuid.UUID { return r.ID },
		func(r dbq.Tenant) (sluice.Tenant, error) { return tenantFromRow(r), nil })
}

// SetTenantDisabled disables or enables a tenant and returns it. Disabling
// ends its dashboard sessions at once (the session query also refuses a
// disabled tenant); its API keys are refused by the API within its key
// cache's lifetime. Disabling twice keeps the first DisabledAt. An unknown
// tenant is sluice.ErrNotFound.
func (s *Store) SetTenantDisabled(ctx context.Context, id uuid.UUID, disabled bool) (sluice.Tenant, error) {
	var tenant sluice.Tenant
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		row, err := q.SetTenantDisabled(ctx, dbq.SetTenantDisabledParams{ID: id, Disabled: disabled})
		if err != nil {
			return NotFound(err)
		}
		tenant = tenantFromRow(row)
		if !disabled {
			return nil
		}
		return q.DeleteTenantDashboardSessions(ctx, id)
	})
	return tenant, err
}

func tenantFromRow(r dbq.Tenant) sluice.Tenant {
	return sluice.Tenant{ID: r.ID, Name: r.Name, AlertEmail: r.AlertEmail, CreatedAt: r.CreatedAt, DisabledAt: r.DisabledAt}
}

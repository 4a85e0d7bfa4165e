package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// SetTenantAPIRate sets a tenant's own limit on the API's rate, written as
// apirate.Parse reads it ("50/s"); nil returns the tenant to the process's
// SLUICE_API_RATE. It answers sluice.ErrNotFound for an unknown tenant.
func (s *Store) SetTenantAPIRate(ctx context.Context, tenantID uuid.UUID, rate *string) error {
	err := ExecRows(ctx, s, (*dbq.Queries).SetTenantAPIRate, dbq.SetTenantAPIRateParams{ID: tenantID, ApiRate: rate})
	if err != nil {
		return fmt.Errorf("set tenant api rate: %w", err)
	}
	return nil
}

// TenantAPIRate returns a tenant's own API rate, or nil when it has none.
func (s *Store) TenantAPIRate(ctx context.Context, tenantID uuid.UUID) (*string, error) {
	rate, err := s.q.TenantAPIRate(ctx, tenantID)
	if err != nil {
		return nil, NotFound(err)
	}
	return rate, nil
}

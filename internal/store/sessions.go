package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// DashboardSession is a live dashboard sign-in.
type DashboardSession struct {
	Tenant    sluice.Tenant
	APIKeyID  uuid.UUID // the key it was opened with
	ExpiresAt time.Time
}

// CreateDashboardSession records a sign-in of tenantID with the key
// apiKeyID, known by the SHA-256 of its token, until expires. It also
// clears the tenant's expired sessions. A key revoked meanwhile is
// sluice.ErrNotFound.
func (s *Store) CreateDashboardSession(ctx context.Context, tokenHash []byte, tenantID, apiKeyID uuid.UUID, expires time.Time) error {
	if err := s.q.DeleteExpiredDashboardSessions(ctx, tenantID); err != nil {
		return err
	}
	return notFound(s.q.CreateDashboardSession(ctx, dbq.CreateDashboardSessionParams{
		TokenHash: tokenHash, TenantID: tenantID, ApiKeyID: apiKeyID, ExpiresAt: expires,
	}))
}

// DashboardSession loads the live session of a token hash: one that has
// not expired, nor been signed out, and whose API key is neither revoked
// nor expired. Anything else is sluice.ErrNotFound.
func (s *Store) DashboardSession(ctx context.Context, tokenHash []byte) (DashboardSession, error) {
	row, err := s.q.DashboardSession(ctx, tokenHash)
	if err != nil {
		return DashboardSession{}, notFound(err)
	}
	return DashboardSession{
		Tenant:    sluice.Tenant{ID: row.ID, Name: row.Name, AlertEmail: row.AlertEmail, CreatedAt: row.CreatedAt},
		APIKeyID:  row.ApiKeyID,
		ExpiresAt: row.ExpiresAt,
	}, nil
}

// DeleteDashboardSession ends a session: sign-out.
func (s *Store) DeleteDashboardSession(ctx context.Context, tokenHash []byte) error {
	return s.q.DeleteDashboardSession(ctx, tokenHash)
}

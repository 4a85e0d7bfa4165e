package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// DashboardSession is a live dashboard sign-in: a tenant's, opened with an
// API key or by a member with its password, or a consumer's portal
// session, opened with a portal link.
type DashboardSession struct {
	Tenant     sluice.Tenant
	APIKeyID   *uuid.UUID // the key a tenant's session was opened with
	APIKeyName string     // and its name
	// Consumer is the consumer a portal session is scoped to; nil for a
	// tenant's session.
	Consumer *PortalConsumer
	// Member is the member a member's session was opened by, with its
	// role now; nil for other sessions.
	Member *SessionMember
	// ReadOnly sessions may look but not change anything.
	ReadOnly  bool
	ExpiresAt time.Time
}

// SessionMember names the member of a session.
type SessionMember struct {
	ID    uuid.UUID
	Email string
	Role  sluice.Role
}

// PortalConsumer names the consumer of a portal session.
type PortalConsumer struct {
	ID   uuid.UUID
	UID  string
	Name string
}

// CreateDashboardSession records a sign-in, known by the SHA-256 of its
// token, until p.ExpiresAt: a tenant's with an API key (p.ApiKeyID), a
// member's with its password (p.MemberID), or a consumer's portal session
// (p.ConsumerID). It also clears the tenant's expired sessions. A key,
// member or consumer gone meanwhile is sluice.ErrNotFound.
func (s *Store) CreateDashboardSession(ctx context.Context, p dbq.CreateDashboardSessionParams) error {
	if err := s.q.DeleteExpiredDashboardSessions(ctx, p.TenantID); err != nil {
		return fmt.Errorf("delete expired dashboard sessions: %w", err)
	}
	return NotFound(s.q.CreateDashboardSession(ctx, p))
}

// DashboardSession loads the live session of a token hash: one that has
// not expired, nor been signed out, and whose API key is neither revoked
// nor expired. Anything else is sluice.ErrNotFound.
func (s *Store) DashboardSession(ctx context.Context, tokenHash []byte) (DashboardSession, error) {
	row, err := s.q.DashboardSession(ctx, tokenHash)
	if err != nil {
		return DashboardSession{}, NotFound(err)
	}
	ds := DashboardSession{
		Tenant:     tenantFromRow(row.Tenant),
		APIKeyID:   row.ApiKeyID,
		APIKeyName: deref(row.ApiKeyName),
		ReadOnly:   row.ReadOnly,
		ExpiresAt:  row.ExpiresAt,
	}
	if row.MemberID != nil {
		ds.Member = &SessionMember{ID: *row.MemberID, Email: deref(row.MemberEmail), Role: sluice.Role(deref(row.MemberRole))}
	}
	if row.ConsumerID != nil {
		ds.Consumer = &PortalConsumer{ID: *row.ConsumerID, UID: deref(row.ConsumerUid), Name: deref(row.ConsumerName)}
	}
	return ds, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

package store

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// PortalTarget is what a portal link is checked against: its consumer, the
// consumer's tenant and the generation every live link must carry.
type PortalTarget struct {
	Tenant     sluice.Tenant
	Consumer   sluice.Consumer
	Generation uuid.UUID
}

// PortalTarget loads the consumer a portal link names. A deleted consumer
// is sluice.ErrNotFound.
func (s *Store) PortalTarget(ctx context.Context, consumerID uuid.UUID) (PortalTarget, error) {
	row, err := s.q.ConsumerForPortal(ctx, consumerID)
	if err != nil {
		return PortalTarget{}, NotFound(err)
	}
	return PortalTarget{
		Tenant:     tenantFromRow(row.Tenant),
		Consumer:   consumerFromRow(row.Consumer, 0),
		Generation: row.Consumer.PortalGeneration,
	}, nil
}

// RevokePortal voids every portal link of the tenant's consumer uid (a new
// generation) and ends its portal sessions, in one transaction.
func (s *Store) RevokePortal(ctx context.Context, tenantID uuid.UUID, uid string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		id, err := q.RenewPortalGeneration(ctx, dbq.RenewPortalGenerationParams{
			TenantID: tenantID, Uid: uid, PortalGeneration: uuid.New(),
		})
		if err != nil {
			return NotFound(err)
		}
		return q.DeletePortalSessions(ctx, &id)
	})
}

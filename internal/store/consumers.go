package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// UpsertConsumer creates the tenant's consumer uid or updates its settings,
// and reports which it did.
func (s *Store) UpsertConsumer(ctx context.Context, tenantID uuid.UUID, uid string, set sluice.ConsumerSettings) (sluice.Consumer, bool, error) {
	row, err := s.q.UpsertConsumer(ctx, dbq.UpsertConsumerParams{
		ID: NewID(), TenantID: tenantID, Uid: uid, Name: set.Name, AlertEmail: set.AlertEmail,
		PortalGeneration: uuid.New(),
	})
	if err != nil {
		return sluice.Consumer{}, false, fmt.Errorf("upsert consumer: %w", err)
	}
	c, err := s.GetConsumer(ctx, tenantID, uid)
	return c, row.Inserted, err
}

// GetConsumer returns one of a tenant's consumers by its uid.
func (s *Store) GetConsumer(ctx context.Context, tenantID uuid.UUID, uid string) (sluice.Consumer, error) {
	row, err := s.q.GetConsumer(ctx, dbq.GetConsumerParams{TenantID: tenantID, Uid: uid})
	if err != nil {
		return sluice.Consumer{}, NotFound(err)
	}
	return consumerFromRow(row.Consumer, row.EndpointCount), nil
}

// ListConsumers returns a page of a tenant's consumers, newest first.
func (s *Store) ListConsumers(ctx context.Context, tenantID uuid.UUID, p sluice.PageParams) (sluice.Page[sluice.Consumer], error) {
	rows, err := s.q.ListConsumers(ctx, dbq.ListConsumersParams{TenantID: tenantID, After: p.After, MaxRows: limitRows(p)})
	if err != nil {
		return sluice.Page[sluice.Consumer]{}, fmt.Errorf("list consumers: %w", err)
	}
	return Page(rows, p, func(r dbq.ListConsumersRow) uuid.UUID { return r.Consumer.ID },
		func(r dbq.ListConsumersRow) (sluice.Consumer, error) {
			return consumerFromRow(r.Consumer, r.EndpointCount), nil
		})
}

func consumerFromRow(r dbq.Consumer, endpoints int64) sluice.Consumer {
	return sluice.Consumer{
		ID: r.ID, TenantID: r.TenantID, UID: r.Uid, Name: r.Name, AlertEmail: r.AlertEmail,
		EndpointCount: endpoints, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// GetDelivery returns one of a tenant's deliveries with its attempts.
func (s *Store) GetDelivery(ctx context.Context, tenantID, id uuid.UUID) (sluice.Delivery, []sluice.Attempt, error) {
	row, err := s.q.GetDelivery(ctx, dbq.GetDeliveryParams{TenantID: tenantID, ID: id})
	if err != nil {
		return sluice.Delivery{}, nil, NotFound(err)
	}
	arows, err := s.q.AttemptsForDelivery(ctx, id)
	if err != nil {
		return sluice.Delivery{}, nil, fmt.Errorf("attempts for delivery: %w", err)
	}
	attempts := make([]sluice.Attempt, len(arows))
	for i, a := range arows {
		a.ResponseBody = s.payloads.OpenBody(ctx, tenantID, a.ResponseBody)
		attempts[i] = AttemptFromRow(a)
	}
	return DeliveryFromRow(row), attempts, nil
}

// ListDeliveries returns a page of a tenant's deliveries, newest first.
func (s *Store) ListDeliveries(ctx context.Context, tenantID uuid.UUID, f sluice.DeliveryFilter, p sluice.PageParams) (sluice.Page[sluice.Delivery], error) {
	rows, err := s.q.ListDeliveries(ctx, dbq.ListDeliveriesParams{
		TenantID: tenantID, EndpointID: f.EndpointID, EventID: f.EventID, Status: f.Status, Consumer: f.Consumer,
		EventType: f.EventType, Since: f.Since, Until: f.Until,
		After: p.After, MaxRows: limitRows(p),
	})
	if err != nil {
		return sluice.Page[sluice.Delivery]{}, fmt.Errorf("list deliveries: %w", err)
	}
	return Page(rows, p, func(r dbq.Delivery) uuid.UUID { return r.ID },
		func(r dbq.Delivery) (sluice.Delivery, error) { return DeliveryFromRow(r), nil })
}

// DeliveryFromRow is a deliveries row as the domain's Delivery.
func DeliveryFromRow(r dbq.Delivery) sluice.Delivery {
	return sluice.Delivery{
		ID: r.ID, TenantID: r.TenantID, EventID: r.EventID, EndpointID: r.EndpointID,
		EventType: r.EventType, Status: r.Status, AttemptCount: int(r.AttemptCount),
		NextAttemptAt: r.NextAttemptAt, ReplayedFrom: r.ReplayedFrom,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

// AttemptFromRow is an attempts row as the domain's Attempt.
func AttemptFromRow(a dbq.DeliveryAttempt) sluice.Attempt {
	out := sluice.Attempt{At: a.At, Error: a.Error, LatencyMS: int(a.LatencyMs), ResponseBody: a.ResponseBody}
	if a.StatusCode != nil {
		out.StatusCode = new(int(*a.StatusCode))
	}
	return out
}

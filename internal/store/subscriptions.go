package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Filter is a subscription's payload filter as stored: its JSON, and the
// SQL/JSON path routing evaluates, compiled from it.
type Filter struct {
	JSON     []byte
	JSONPath string
}

// CreateSubscription subscribes one of a tenant's endpoints to event
// types, with payload filter f (none when nil). An endpoint that is not
// the tenant's is sluice.ErrNotFound.
func (s *Store) CreateSubscription(ctx context.Context, tenantID, endpointID uuid.UUID, eventTypes []string, f *Filter) (sluice.Subscription, error) {
	row, err := s.q.CreateSubscription(ctx, subscriptionParams(tenantID, endpointID, eventTypes, f))
	if err != nil {
		return sluice.Subscription{}, fmt.Errorf("create subscription: %w", NotFound(err))
	}
	return subscriptionFromRow(row), nil
}

func subscriptionParams(tenantID, endpointID uuid.UUID, eventTypes []string, f *Filter) dbq.CreateSubscriptionParams {
	p := dbq.CreateSubscriptionParams{ID: NewID(), TenantID: tenantID, EndpointID: endpointID, EventTypes: eventTypes}
	if f != nil {
		p.Filter, p.FilterPath = f.JSON, &f.JSONPath
	}
	return p
}

// GetSubscription returns one of a tenant's subscriptions.
func (s *Store) GetSubscription(ctx context.Context, tenantID, id uuid.UUID) (sluice.Subscription, error) {
	row, err := s.q.GetSubscription(ctx, dbq.GetSubscriptionParams{TenantID: tenantID, ID: id})
	if err != nil {
		return sluice.Subscription{}, fmt.Errorf("read subscription: %w", NotFound(err))
	}
	return subscriptionFromRow(row), nil
}

// ListSubscriptions returns a page of a tenant's subscriptions, newest
// first, optionally only those of one endpoint.
func (s *Store) ListSubscriptions(ctx context.Context, tenantID uuid.UUID, endpointID *uuid.UUID, p sluice.PageParams) (sluice.Page[sluice.Subscription], error) {
	rows, err := s.q.ListSubscriptions(ctx, dbq.ListSubscriptionsParams{
		TenantID:   tenantID,
		EndpointID: endpointID,
		After:      p.After,
		MaxRows:    limitRows(p),
	})
	if err != nil {
		return sluice.Page[sluice.Subscription]{}, fmt.Errorf("list subscriptions: %w", err)
	}
	return Page(rows, p, func(r dbq.Subscription) uuid.UUID { return r.ID },
		func(r dbq.Subscription) (sluice.Subscription, error) { return subscriptionFromRow(r), nil })
}

func subscriptionFromRow(r dbq.Subscription) sluice.Subscription {
	return sluice.Subscription{
		ID:         r.ID,
		TenantID:   r.TenantID,
		EndpointID: r.EndpointID,
		EventTypes: r.EventTypes,
		Filter:     json.RawMessage(r.Filter),
		CreatedAt:  r.CreatedAt,
	}
}

// SetSubscriptions replaces every subscription of one of a tenant's
// endpoints with one to patterns and filter f (nil: none), or with none
// when patterns is empty. An endpoint that is not the tenant's is
// sluice.ErrNotFound.
func (s *Store) SetSubscriptions(ctx context.Context, tenantID, endpointID uuid.UUID, patterns []string, f *Filter) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if _, err := q.GetEndpoint(ctx, dbq.GetEndpointParams{TenantID: tenantID, ID: endpointID}); err != nil {
			return fmt.Errorf("read endpoint: %w", NotFound(err))
		}
		if err := q.DeleteEndpointSubscriptions(ctx, dbq.DeleteEndpointSubscriptionsParams{TenantID: tenantID, EndpointID: endpointID}); err != nil {
			return fmt.Errorf("delete endpoint subscriptions: %w", err)
		}
		if len(patterns) == 0 {
			return nil
		}
		if _, err := q.CreateSubscription(ctx, subscriptionParams(tenantID, endpointID, patterns, f)); err != nil {
			return fmt.Errorf("create subscription: %w", NotFound(err))
		}
		return nil
	})
}

package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// SubscriptionInput is what a door asks of a subscription: its event-type
// patterns and payload filter.
type SubscriptionInput struct {
	// Patterns are the patterns as written: "*", an event type, or a
	// prefix such as "video.*". A portal caller may subscribe only to
	// what its catalogue lists.
	Patterns []string
	// Listed are patterns picked from the catalogue (the dashboard's
	// boxes): each is "*" or an event type of the tenant's catalogue or
	// one of Sluice's own. They come before Patterns.
	Listed []string
	// Filter is the payload filter's JSON; empty or null for none.
	Filter json.RawMessage
}

// CreateSubscription subscribes an endpoint of the caller's scope to the
// patterns of in, with its filter. An endpoint outside the scope is
// sluice.ErrNotFound, once the input is valid.
func (c *Control) CreateSubscription(ctx context.Context, who Caller, endpointID uuid.UUID, in SubscriptionInput) (sluice.Subscription, error) {
	var sub sluice.Subscription
	err := c.change(ctx, who, SubscriptionCreated, func(ctx context.Context, e *sluice.AuditEntry) error {
		v := &sluice.ValidationError{}
		subs, err := c.subscriptionOf(ctx, who, &in, true, v)
		if err != nil {
			return err
		}
		if err := v.Err(); err != nil {
			return err
		}
		if _, err := c.Endpoint(ctx, who, endpointID); err != nil {
			return err
		}
		if sub, err = c.store.CreateSubscription(ctx, who.Tenant, endpointID, subs.patterns, subs.filter); err != nil {
			return err
		}
		e.ObjectID = object(sub.ID)
		return nil
	})
	return sub, err
}

// Subscription is one subscription of the caller's scope: one of its
// endpoints'.
func (c *Control) Subscription(ctx context.Context, who Caller, id uuid.UUID) (sluice.Subscription, error) {
	sub, err := c.store.GetSubscription(ctx, who.Tenant, id)
	if err != nil {
		return sluice.Subscription{}, err
	}
	if who.portal() {
		if _, err := c.Endpoint(ctx, who, sub.EndpointID); err != nil {
			return sluice.Subscription{}, err
		}
	}
	return sub, nil
}

// Subscriptions is a page of the caller's subscriptions, newest first:
// those of one endpoint when endpointID is not nil. A portal caller names
// one of its endpoints.
func (c *Control) Subscriptions(ctx context.Context, who Caller, endpointID *uuid.UUID, p sluice.PageParams) (sluice.Page[sluice.Subscription], error) {
	if who.portal() {
		if endpointID == nil {
			v := &sluice.ValidationError{}
			v.Add("endpoint_id", "is required")
			return sluice.Page[sluice.Subscription]{}, v
		}
		if _, err := c.Endpoint(ctx, who, *endpointID); err != nil {
			return sluice.Page[sluice.Subscription]{}, err
		}
	}
	return c.store.ListSubscriptions(ctx, who.Tenant, endpointID, p)
}

// DeleteSubscription deletes a subscription of the caller's scope.
func (c *Control) DeleteSubscription(ctx context.Context, who Caller, id uuid.UUID) error {
	return c.change(ctx, who, SubscriptionDeleted, func(ctx context.Context, e *sluice.AuditEntry) error {
		if _, err := c.Subscription(ctx, who, id); err != nil {
			return err
		}
		e.ObjectID = object(id)
		if err := store.ExecRows(ctx, c.store, (*dbq.Queries).DeleteSubscription, dbq.DeleteSubscriptionParams{TenantID: who.Tenant, ID: id}); err != nil {
			return fmt.Errorf("delete subscription: %w", err)
		}
		return nil
	})
}

// subscriptions are the checked patterns and compiled filter of a
// SubscriptionInput; nil when there is none to set.
type subscriptions struct {
	patterns []string
	filter   *store.Filter
}

// subscriptionOf checks in, adding what it refuses to v, and returns the
// subscription to make (nil for a nil in). required refuses an empty list
// of patterns; without it, an empty list asks for no subscription.
func (c *Control) subscriptionOf(ctx context.Context, who Caller, in *SubscriptionInput, required bool, v *sluice.ValidationError) (*subscriptions, error) {
	if in == nil {
		return nil, nil
	}
	listed := in.Listed
	if who.portal() {
		listed = append(slices.Clone(listed), in.Patterns...)
	}
	if len(listed) > 0 {
		catalogue, err := c.store.ListEventTypes(ctx, who.Tenant, sluice.PageParams{Limit: sluice.MaxPageLimit})
		if err != nil {
			return nil, err
		}
		types := append(catalogue.Items, sluice.OperationalEventTypes()...)
		for _, p := range listed {
			if p != "*" && !slices.ContainsFunc(types, func(et sluice.EventType) bool { return et.Name == p }) {
				v.Add("event_types", "%q is not in the event-type catalogue", p)
			}
		}
	}
	patterns := slices.Clone(in.Listed)
	for _, p := range in.Patterns {
		if !slices.Contains(patterns, p) {
			patterns = append(patterns, p)
		}
	}
	if required || len(patterns) > 0 {
		checkPatterns("event_types", patterns, v)
	}
	return &subscriptions{patterns: patterns, filter: compileFilter(in.Filter, v)}, nil
}

// set replaces the endpoint's subscriptions with subs, when there is subs.
func (subs *subscriptions) set(ctx context.Context, c *Control, who Caller, endpointID uuid.UUID) error {
	if subs == nil {
		return nil
	}
	return c.store.SetSubscriptions(ctx, who.Tenant, endpointID, subs.patterns, subs.filter)
}

// compileFilter reads a subscription's filter (nil when absent or null),
// naming a refused one's failing place as the field:
// "filter.$or[1].total.$gt".
func compileFilter(raw json.RawMessage, v *sluice.ValidationError) *store.Filter {
	if noFilter(raw) {
		return nil
	}
	f, err := filter.Parse(raw)
	var fe *filter.Error
	switch {
	case errors.As(err, &fe):
		field := "filter"
		if fe.Path != "" {
			field += "." + fe.Path
		}
		v.Add(field, "%s", fe.Msg)
		return nil
	case err != nil:
		v.Add("filter", "%s", err.Error())
		return nil
	}
	return &store.Filter{JSON: []byte(f.String()), JSONPath: f.JSONPath()}
}

// noFilter reports whether raw sets no filter.
func noFilter(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

package control

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// The reads every door shares, each within the caller's scope: a tenant's
// caller sees all of its tenant's endpoints, deliveries and events; a
// portal caller only its consumer's endpoints, their deliveries and
// attempts, and the events addressed to the consumer or broadcast. An
// object outside the scope is sluice.ErrNotFound, as an id that does not
// exist. A change looks its object up through these first; an endpoint
// never moves between consumers, nor a delivery between endpoints, so the
// check holds for the change that follows it.

// Endpoint is one endpoint of the caller's scope.
func (c *Control) Endpoint(ctx context.Context, who Caller, id uuid.UUID) (sluice.Endpoint, error) {
	ep, err := c.store.GetEndpoint(ctx, who.Tenant, id)
	if err != nil {
		return sluice.Endpoint{}, err
	}
	if !who.ownsEndpoint(ep) {
		return sluice.Endpoint{}, sluice.ErrNotFound
	}
	return c.current(ep), nil
}

// Endpoints is a page of the caller's endpoints; consumer narrows a
// tenant's caller to one consumer's (a portal caller's is its own).
func (c *Control) Endpoints(ctx context.Context, who Caller, consumer *string, p sluice.PageParams) (sluice.Page[sluice.Endpoint], error) {
	if who.portal() {
		consumer = who.Consumer
	}
	page, err := c.store.ListEndpoints(ctx, who.Tenant, consumer, p)
	for i, ep := range page.Items {
		page.Items[i] = c.current(ep)
	}
	return page, err
}

// Delivery is one delivery of the caller's scope, with its attempts.
func (c *Control) Delivery(ctx context.Context, who Caller, id uuid.UUID) (sluice.Delivery, []sluice.Attempt, error) {
	del, attempts, err := c.store.GetDelivery(ctx, who.Tenant, id)
	if err != nil {
		return sluice.Delivery{}, nil, err
	}
	if who.portal() {
		if _, err := c.Endpoint(ctx, who, del.EndpointID); err != nil {
			return sluice.Delivery{}, nil, err
		}
	}
	return del, attempts, nil
}

// Event is one event of the caller's scope with its fan-out: for a portal
// caller, only the deliveries to its consumer's endpoints (a broadcast
// reaches other consumers too).
func (c *Control) Event(ctx context.Context, who Caller, id uuid.UUID) (sluice.Event, []sluice.Delivery, error) {
	ev, deliveries, err := c.store.GetEvent(ctx, who.Tenant, id)
	if err != nil {
		return sluice.Event{}, nil, err
	}
	if !who.seesEvent(ev) {
		return sluice.Event{}, nil, sluice.ErrNotFound
	}
	if who.portal() {
		page, err := c.Deliveries(ctx, who, sluice.DeliveryFilter{EventID: &id}, sluice.PageParams{Limit: sluice.MaxPageLimit})
		if err != nil {
			return sluice.Event{}, nil, err
		}
		deliveries = page.Items
	}
	return ev, deliveries, nil
}

// FanOut is how many endpoints of the caller's scope each of events went
// to (replays left out), by event id; an event that went to none is not
// in it. One query for a listed page of events.
func (c *Control) FanOut(ctx context.Context, who Caller, events []sluice.Event) (map[uuid.UUID]int64, error) {
	out := make(map[uuid.UUID]int64, len(events))
	if len(events) == 0 {
		return out, nil
	}
	p := dbq.FanOutCountsParams{TenantID: who.Tenant, EventIds: make([]uuid.UUID, len(events)), Consumer: who.Consumer}
	for i, ev := range events {
		p.EventIds[i] = ev.ID
	}
	rows, err := store.Read(ctx, c.store, (*dbq.Queries).FanOutCounts, p)
	if err != nil {
		return nil, fmt.Errorf("fan-out counts: %w", err)
	}
	for _, r := range rows {
		out[r.EventID] = r.Endpoints
	}
	return out, nil
}

// EndpointsByID is the endpoints of the caller's scope with ids, taken
// from known when there and looked up otherwise. Endpoints that no longer
// exist, or are outside the scope, are left out.
func (c *Control) EndpointsByID(ctx context.Context, who Caller, ids []uuid.UUID, known []sluice.Endpoint) (map[uuid.UUID]sluice.Endpoint, error) {
	out := make(map[uuid.UUID]sluice.Endpoint, len(known))
	for _, e := range known {
		if who.ownsEndpoint(e) {
			out[e.ID] = e
		}
	}
	for _, id := range ids {
		if _, ok := out[id]; ok {
			continue
		}
		e, err := c.Endpoint(ctx, who, id)
		if errors.Is(err, sluice.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[id] = e
	}
	return out, nil
}

// SubscribedTo is what an endpoint of the caller's scope is subscribed
// to, across its subscriptions: the event-type patterns, in order and
// without repeats, and the payload filters, each once ("" for a
// subscription without one, listed only beside filtered ones: it lets
// every event through).
func (c *Control) SubscribedTo(ctx context.Context, who Caller, endpointID uuid.UUID) (patterns, filters []string, err error) {
	if _, err := c.Endpoint(ctx, who, endpointID); err != nil {
		return nil, nil, err
	}
	page, err := c.store.ListSubscriptions(ctx, who.Tenant, &endpointID, sluice.PageParams{Limit: sluice.MaxPageLimit})
	if err != nil {
		return nil, nil, err
	}
	seen, seenFilter := map[string]bool{}, map[string]bool{}
	for i := len(page.Items) - 1; i >= 0; i-- { // oldest first
		sub := page.Items[i]
		for _, p := range sub.EventTypes {
			if !seen[p] {
				seen[p] = true
				patterns = append(patterns, p)
			}
		}
		if f := string(sub.Filter); !seenFilter[f] {
			seenFilter[f] = true
			filters = append(filters, f)
		}
	}
	if len(filters) == 1 && filters[0] == "" {
		filters = nil
	}
	return patterns, filters, nil
}

// Catalogue is the event types an endpoint of the caller's may subscribe
// to: the tenant's catalogue, followed by Sluice's own operational event
// types.
func (c *Control) Catalogue(ctx context.Context, who Caller) ([]sluice.EventType, error) {
	page, err := c.store.ListEventTypes(ctx, who.Tenant, sluice.PageParams{Limit: sluice.MaxPageLimit})
	if err != nil {
		return nil, err
	}
	return append(page.Items, sluice.OperationalEventTypes()...), nil
}

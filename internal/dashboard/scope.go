package dashboard

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/replay"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// Scoping. A tenant's session sees all of its tenant's endpoints,
// deliveries and events; a portal session sees only its consumer's: the
// consumer's endpoints, their deliveries and attempts, and the events
// addressed to the consumer or broadcast. Pages never read or change those
// objects through the store directly but through the request's scoped
// value (d.in(r)), whose every method applies the session's scope: an
// object outside it is sluice.ErrNotFound, the same 404 page as an id that
// does not exist. The methods that change things (scope_actions.go) look
// the object up through the same methods first.

// scoped is the store as one session may see it.
type scoped struct {
	st     *store.Store
	tenant uuid.UUID
	// consumer is the uid a portal session is scoped to; nil for a
	// tenant's session.
	consumer *string
}

// in is the scope of a request that passed requireSession.
func (d *Dashboard) in(r *http.Request) scoped {
	s, _ := sessionFromContext(r.Context())
	sc := scoped{st: d.store, tenant: s.tenant.ID}
	if s.consumer != nil {
		uid := s.consumer.UID
		sc.consumer = &uid
	}
	return sc
}

// portal reports whether the scope is one consumer's.
func (sc scoped) portal() bool { return sc.consumer != nil }

// ownsEndpoint reports whether an endpoint is inside the scope.
func (sc scoped) ownsEndpoint(ep sluice.Endpoint) bool {
	return sc.consumer == nil || (ep.Consumer != nil && *ep.Consumer == *sc.consumer)
}

// seesEvent reports whether an event is inside the scope.
func (sc scoped) seesEvent(ev sluice.Event) bool {
	return sc.consumer == nil || ev.Broadcast || (ev.Consumer != nil && *ev.Consumer == *sc.consumer)
}

// endpoint returns one endpoint of the scope.
func (sc scoped) endpoint(ctx context.Context, id uuid.UUID) (sluice.Endpoint, error) {
	ep, err := sc.st.GetEndpoint(ctx, sc.tenant, id)
	if err != nil {
		return sluice.Endpoint{}, err
	}
	if !sc.ownsEndpoint(ep) {
		return sluice.Endpoint{}, sluice.ErrNotFound
	}
	return ep, nil
}

// endpoints returns a page of the scope's endpoints.
func (sc scoped) endpoints(ctx context.Context, p sluice.PageParams) (sluice.Page[sluice.Endpoint], error) {
	return sc.st.ListEndpoints(ctx, sc.tenant, sc.consumer, p)
}

// delivery returns one delivery of the scope, with its attempts: a portal
// session's only when its endpoint is the consumer's.
func (sc scoped) delivery(ctx context.Context, id uuid.UUID) (sluice.Delivery, []sluice.Attempt, error) {
	del, attempts, err := sc.st.GetDelivery(ctx, sc.tenant, id)
	if err != nil {
		return sluice.Delivery{}, nil, err
	}
	if sc.portal() {
		if _, err := sc.endpoint(ctx, del.EndpointID); err != nil {
			return sluice.Delivery{}, nil, err
		}
	}
	return del, attempts, nil
}

// deliveries returns a page of the scope's deliveries matching f; an
// endpoint filter outside the scope is sluice.ErrNotFound.
func (sc scoped) deliveries(ctx context.Context, f sluice.DeliveryFilter, p sluice.PageParams) (sluice.Page[sluice.Delivery], error) {
	if f.EndpointID != nil {
		if _, err := sc.endpoint(ctx, *f.EndpointID); err != nil {
			return sluice.Page[sluice.Delivery]{}, err
		}
	}
	f.Consumer = sc.consumer
	return sc.st.ListDeliveries(ctx, sc.tenant, f, p)
}

// event returns one event of the scope with its fan-out: for a portal
// session, only the deliveries to the consumer's endpoints (a broadcast
// reaches other consumers too).
func (sc scoped) event(ctx context.Context, id uuid.UUID) (sluice.Event, []sluice.Delivery, error) {
	ev, deliveries, err := sc.st.GetEvent(ctx, sc.tenant, id)
	if err != nil {
		return sluice.Event{}, nil, err
	}
	if !sc.seesEvent(ev) {
		return sluice.Event{}, nil, sluice.ErrNotFound
	}
	if sc.portal() {
		page, err := sc.deliveries(ctx, sluice.DeliveryFilter{EventID: &id}, sluice.PageParams{Limit: sluice.MaxPageLimit})
		if err != nil {
			return sluice.Event{}, nil, err
		}
		deliveries = page.Items
	}
	return ev, deliveries, nil
}

// events returns a page of the scope's events, optionally of one type.
func (sc scoped) events(ctx context.Context, eventType *string, p sluice.PageParams) (sluice.Page[sluice.Event], error) {
	return sc.st.ListConsumerEvents(ctx, sc.tenant, sc.consumer, eventType, p)
}

// countReplayable is replay.CountReplayable for an endpoint of the scope.
func (sc scoped) countReplayable(ctx context.Context, endpointID uuid.UUID, f sluice.ReplayFilter) (int64, error) {
	if _, err := sc.endpoint(ctx, endpointID); err != nil {
		return 0, err
	}
	return replay.CountReplayable(ctx, sc.st, sc.tenant, endpointID, f)
}

// attemptStats is store.AttemptStats for an endpoint of the scope.
func (sc scoped) attemptStats(ctx context.Context, endpointID uuid.UUID, since, until time.Time, bucket time.Duration) ([]sluice.AttemptBucket, error) {
	if _, err := sc.endpoint(ctx, endpointID); err != nil {
		return nil, err
	}
	return sc.st.AttemptStats(ctx, endpointID, since, until, bucket)
}

// endpointsByID returns the endpoints with ids: from known when there, else
// from the store. Endpoints that no longer exist, or are outside the
// scope, are left out.
func (sc scoped) endpointsByID(ctx context.Context, ids []uuid.UUID, known []sluice.Endpoint) (map[uuid.UUID]sluice.Endpoint, error) {
	out := make(map[uuid.UUID]sluice.Endpoint, len(known))
	for _, e := range known {
		out[e.ID] = e
	}
	for _, id := range ids {
		if _, ok := out[id]; ok {
			continue
		}
		e, err := sc.endpoint(ctx, id)
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

// urls names endpoints by their URLs.
func urls(endpoints map[uuid.UUID]sluice.Endpoint) map[uuid.UUID]string {
	out := make(map[uuid.UUID]string, len(endpoints))
	for id, e := range endpoints {
		out[id] = e.URL
	}
	return out
}

// catalogue is the tenant's event-type catalogue, followed by Sluice's own
// operational event types, which every session subscribes from.
func (sc scoped) catalogue(ctx context.Context) ([]sluice.EventType, error) {
	page, err := sc.st.ListEventTypes(ctx, sc.tenant, sluice.PageParams{Limit: sluice.MaxPageLimit})
	return append(page.Items, sluice.OperationalEventTypes()...), err
}

// catalogueNames are the names of the catalogue's event types, which the
// deliveries filters offer.
func (sc scoped) catalogueNames(ctx context.Context) ([]string, error) {
	types, err := sc.catalogue(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = t.Name
	}
	return out, nil
}

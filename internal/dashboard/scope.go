package dashboard

import (
	"context"
	"net/http"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// Scoping. A tenant's session sees all of its tenant's endpoints,
// deliveries and events; a portal session sees only its consumer's
// (control.Caller). Pages read those objects through the control layer
// with the request's caller (caller(r)); an object outside the scope is
// sluice.ErrNotFound, the same 404 page as an id that does not exist.
//
// scoped is what the endpoint forms' changes (manage.go,
// scope_actions.go) still reach the store through; its reads are the
// control layer's.
type scoped struct {
	st     *store.Store
	jobs   store.JobQueue // unparks the dispatch an endpoint's change concerns
	tenant uuid.UUID
	// consumer is the uid a portal session is scoped to; nil for a
	// tenant's session.
	consumer *string
	ctl      *control.Control
	who      control.Caller
}

// in is the scope of a request that passed requireSession.
func (d *Dashboard) in(r *http.Request) scoped {
	who := caller(r)
	return scoped{st: d.store, jobs: d.jobs, tenant: who.Tenant, consumer: who.Consumer, ctl: d.ctl, who: who}
}

// portal reports whether the scope is one consumer's.
func (sc scoped) portal() bool { return sc.consumer != nil }

// endpoint returns one endpoint of the scope (control.Endpoint).
func (sc scoped) endpoint(ctx context.Context, id uuid.UUID) (sluice.Endpoint, error) {
	return sc.ctl.Endpoint(ctx, sc.who, id)
}

// subscriptions is what an endpoint of the scope is subscribed to
// (control.SubscribedTo).
func (sc scoped) subscriptions(ctx context.Context, endpointID uuid.UUID) (patterns, filters []string, err error) {
	return sc.ctl.SubscribedTo(ctx, sc.who, endpointID)
}

// catalogue is the event types the scope's endpoints subscribe from
// (control.Catalogue).
func (sc scoped) catalogue(ctx context.Context) ([]sluice.EventType, error) {
	return sc.ctl.Catalogue(ctx, sc.who)
}

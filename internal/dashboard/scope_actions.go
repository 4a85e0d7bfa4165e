package dashboard

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// The scope's changes: each looks its object up through the scope first
// (scope.go), so an object outside the scope is sluice.ErrNotFound and
// nothing changes. An endpoint never moves between consumers, and a
// delivery never between endpoints, so the check holds for the change
// that follows it.

// createEndpoint creates an endpoint in the scope, subscribed to patterns
// with filter f (nil: none): a portal session's belongs to its consumer, a
// tenant's to the tenant.
func (sc scoped) createEndpoint(ctx context.Context, set sluice.EndpointSettings, patterns []string, f *filter.Filter) (sluice.Endpoint, error) {
	set.Consumer = sc.consumer
	ep, _, err := sc.st.CreateEndpoint(ctx, sc.tenant, set)
	if err != nil {
		return sluice.Endpoint{}, err
	}
	return ep, sc.st.SetSubscriptions(ctx, sc.tenant, ep.ID, patterns, f)
}

// updateEndpoint replaces the settings and subscriptions of an endpoint of
// the scope; its consumer never changes.
func (sc scoped) updateEndpoint(ctx context.Context, id uuid.UUID, set sluice.EndpointSettings, patterns []string, f *filter.Filter) error {
	ep, err := sc.endpoint(ctx, id)
	if err != nil {
		return err
	}
	set.Consumer = ep.Consumer
	if _, err := sc.st.UpdateEndpoint(ctx, sc.tenant, id, set, sc.jobs); err != nil {
		return err
	}
	return sc.st.SetSubscriptions(ctx, sc.tenant, id, patterns, f)
}

// setDisabled disables or enables an endpoint of the scope.
func (sc scoped) setDisabled(ctx context.Context, id uuid.UUID, disabled bool) error {
	ep, err := sc.endpoint(ctx, id)
	if err != nil {
		return err
	}
	set := ep.Settings()
	set.Disabled = disabled
	_, err = sc.st.UpdateEndpoint(ctx, sc.tenant, id, set, sc.jobs)
	return err
}

// secret is the signing secret of an endpoint of the scope.
func (sc scoped) secret(ctx context.Context, id uuid.UUID) (string, error) {
	if _, err := sc.endpoint(ctx, id); err != nil {
		return "", err
	}
	return sc.st.EndpointSecret(ctx, sc.tenant, id)
}

// rotateSecret gives an endpoint of the scope a new secret; the old one
// signs beside it for grace.
func (sc scoped) rotateSecret(ctx context.Context, id uuid.UUID, grace time.Duration) (string, error) {
	if _, err := sc.endpoint(ctx, id); err != nil {
		return "", err
	}
	return sc.st.RotateEndpointSecret(ctx, sc.tenant, id, grace)
}

// sendTest sends a sluice.test event to an endpoint of the scope.
func (sc scoped) sendTest(ctx context.Context, id uuid.UUID, payload []byte, jobs store.JobQueue) (sluice.Event, error) {
	if _, err := sc.endpoint(ctx, id); err != nil {
		return sluice.Event{}, err
	}
	return sc.st.CreateTestEvent(ctx, sc.tenant, id, payload, jobs)
}

// closeCircuit resets the circuit of an endpoint of the scope.
func (sc scoped) closeCircuit(ctx context.Context, id uuid.UUID, jobs store.JobQueue) error {
	if _, err := sc.endpoint(ctx, id); err != nil {
		return err
	}
	_, err := dispatch.CloseCircuit(ctx, sc.st, jobs, sc.tenant, id)
	return err
}

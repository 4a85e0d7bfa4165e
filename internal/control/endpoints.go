package control

import (
	"context"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// DeleteEndpoint deletes an endpoint of the caller's scope, with its
// subscriptions and deliveries. A poll reader of this process forgets it
// at once; others hear of it from the deletion's notification.
func (c *Control) DeleteEndpoint(ctx context.Context, who Caller, id uuid.UUID) error {
	err := c.change(ctx, who, EndpointDeleted, func(ctx context.Context, e *sluice.AuditEntry) error {
		if _, err := c.Endpoint(ctx, who, id); err != nil {
			return err
		}
		e.ObjectID = object(id)
		return c.store.DeleteEndpoint(ctx, who.Tenant, id)
	})
	if err != nil {
		return err
	}
	c.poll.Forget(id)
	return nil
}

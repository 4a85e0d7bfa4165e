package control

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// An endpoint whose verification is "challenge" receives nothing until its
// receiver answers a signed challenge (dispatch.VerifyWorker): it is
// challenged when it is created so, when verification is turned on or its
// URL changes, and when VerifyEndpoint asks again. Its deliveries queue
// meanwhile; the answer starts its run.

// VerifyEndpoint sends an endpoint of the caller's scope a new challenge:
// it is unverified until its receiver answers it. An endpoint whose
// verification is not "challenge" is sluice.ErrConflict.
func (c *Control) VerifyEndpoint(ctx context.Context, who Caller, id uuid.UUID) (sluice.Endpoint, error) {
	err := c.change(ctx, who, EndpointVerifyAsked, func(ctx context.Context, e *sluice.AuditEntry) error {
		ep, err := c.Endpoint(ctx, who, id)
		if err != nil {
			return err
		}
		if !ep.DeliveryOptions.Challenged() {
			return fmt.Errorf("%w: the endpoint's verification is not \"challenge\"", sluice.ErrConflict)
		}
		if _, err := c.store.UpdateEndpoint(ctx, who.Tenant, id, ep.Settings(), true); err != nil {
			return err
		}
		e.ObjectID = object(id)
		return c.challenge(ctx, id, true)
	})
	if err != nil {
		return sluice.Endpoint{}, err
	}
	return c.Endpoint(ctx, who, id)
}

// challenge queues the job that challenges the endpoint, when ask, in the
// change's transaction.
func (c *Control) challenge(ctx context.Context, id uuid.UUID, ask bool) error {
	if !ask {
		return nil
	}
	return c.store.InTx(ctx, func(tx store.Tx) error {
		if err := c.nudger.Verify(ctx, tx.Tx, id); err != nil {
			return fmt.Errorf("queue verification: %w", err)
		}
		return nil
	})
}

// release starts the run of an endpoint whose deliveries waited for an
// answer to a challenge that is no longer asked for.
func (c *Control) release(ctx context.Context, id uuid.UUID) error {
	return c.store.InTx(ctx, func(tx store.Tx) error {
		if err := c.nudger.Unpark(ctx, tx.Tx, id, nil); err != nil {
			return fmt.Errorf("start dispatch: %w", err)
		}
		return nil
	})
}

package control

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/replay"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Sending deliveries again: one retried (made due now) or replayed (a new
// delivery of its event), or an endpoint's matching deliveries replayed in
// bulk. Package replay does the work; each change here looks its object up
// through the caller's scope first, and commits with its audit entry and
// the endpoint's dispatch job.

// RetryDelivery makes a pending or failed delivery of the caller's scope
// due now, without a new delivery (replay.Retry); a delivered or dead one
// is sluice.ErrConflict (replay.ErrNotQueued).
func (c *Control) RetryDelivery(ctx context.Context, who Caller, id uuid.UUID) (sluice.Delivery, error) {
	var out sluice.Delivery
	err := c.change(ctx, who, DeliveryRetried, func(ctx context.Context, e *sluice.AuditEntry) error {
		if _, _, err := c.Delivery(ctx, who, id); err != nil {
			return err
		}
		e.ObjectID = object(id)
		var err error
		out, err = replay.Retry(ctx, c.store, who.Tenant, id, c.nudger)
		return err
	})
	return out, err
}

// ReplayDelivery queues a new delivery of a delivered or dead delivery of
// the caller's scope, to the same endpoint (replay.Delivery), and returns
// it; the audit entry names the delivery replayed. A queued one, or one
// whose event has a delivery to the endpoint queued already, is
// sluice.ErrConflict.
func (c *Control) ReplayDelivery(ctx context.Context, who Caller, id uuid.UUID) (sluice.Delivery, error) {
	var out sluice.Delivery
	err := c.change(ctx, who, DeliveryReplayed, func(ctx context.Context, e *sluice.AuditEntry) error {
		if _, _, err := c.Delivery(ctx, who, id); err != nil {
			return err
		}
		e.ObjectID = object(id)
		var err error
		out, err = replay.Delivery(ctx, c.store, who.Tenant, id, c.nudger)
		return err
	})
	return out, err
}

// ReplayEndpoint replays, for each event, the newest delivery to an
// endpoint of the caller's scope when it matches f (replay.Endpoint), and
// returns how many it queued. f.Status is dead or delivered.
func (c *Control) ReplayEndpoint(ctx context.Context, who Caller, id uuid.UUID, f sluice.ReplayFilter) (int64, error) {
	if err := validReplay(f); err != nil {
		return 0, err
	}
	var n int64
	err := c.change(ctx, who, EndpointReplayed, func(ctx context.Context, e *sluice.AuditEntry) error {
		if _, err := c.Endpoint(ctx, who, id); err != nil {
			return err
		}
		e.ObjectID = object(id)
		var err error
		n, err = replay.Endpoint(ctx, c.store, who.Tenant, id, f, c.nudger)
		return err
	})
	return n, err
}

// CountReplayable is how many deliveries ReplayEndpoint with f would queue
// now, for the question that asks to confirm it.
func (c *Control) CountReplayable(ctx context.Context, who Caller, endpointID uuid.UUID, f sluice.ReplayFilter) (int64, error) {
	if err := validReplay(f); err != nil {
		return 0, err
	}
	if _, err := c.Endpoint(ctx, who, endpointID); err != nil {
		return 0, err
	}
	return replay.CountReplayable(ctx, c.store, who.Tenant, endpointID, f)
}

// validReplay checks a bulk replay's filter: only deliveries that are no
// longer queued are replayed.
func validReplay(f sluice.ReplayFilter) error {
	v := &sluice.ValidationError{}
	switch f.Status {
	case sluice.DeliveryDead, sluice.DeliveryDelivered:
	case sluice.DeliveryPending, sluice.DeliveryFailed:
		v.Add("status", "must be dead or delivered: %s deliveries are still queued (POST /v1/deliveries/{id}/retry makes one due now)", f.Status)
	default:
		v.Add("status", "must be dead or delivered")
	}
	if f.Since != nil && f.Until != nil && !f.Since.Before(*f.Until) {
		v.Add("until", "must be after since")
	}
	return v.Err()
}

// validStatus checks a deliveries list's status filter.
func validStatus(status *string) error {
	if status == nil {
		return nil
	}
	switch *status {
	case sluice.DeliveryPending, sluice.DeliveryDelivered, sluice.DeliveryFailed, sluice.DeliveryDead:
		return nil
	}
	v := &sluice.ValidationError{}
	v.Add("status", "must be pending, delivered, failed or dead")
	return v
}

// NewestReplays is the newest replay of each of ds that has been replayed
// (replay.NewestOf), by the replayed delivery's id. ds are deliveries
// the caller read through this package; those of another tenant are left
// out.
func (c *Control) NewestReplays(ctx context.Context, who Caller, ds []sluice.Delivery) (map[uuid.UUID]replay.Newest, error) {
	ids := make([]uuid.UUID, 0, len(ds))
	for _, d := range ofTenant(who, ds) {
		ids = append(ids, d.ID)
	}
	return replay.NewestOf(ctx, c.store, ids)
}

// LastAttempts is the newest attempt of each of ds that has one, by
// delivery id: one query for a listed page. ds are deliveries the caller
// read through this package; those of another tenant are left out.
func (c *Control) LastAttempts(ctx context.Context, who Caller, ds []sluice.Delivery) (map[uuid.UUID]sluice.Attempt, error) {
	ds = ofTenant(who, ds)
	out := make(map[uuid.UUID]sluice.Attempt, len(ds))
	if len(ds) == 0 {
		return out, nil
	}
	p := dbq.LastAttemptsParams{DeliveryIds: make([]uuid.UUID, len(ds)), EventIds: make([]uuid.UUID, len(ds))}
	for i, d := range ds {
		p.DeliveryIds[i], p.EventIds[i] = d.ID, d.EventID
	}
	var rows []dbq.DeliveryAttempt
	err := c.store.InTx(ctx, func(tx store.Tx) error {
		var err error
		rows, err = tx.Q.LastAttempts(ctx, p)
		if err != nil {
			return fmt.Errorf("last attempts: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("last attempts: %w", err)
	}
	for _, r := range rows {
		r.ResponseBody = c.store.Payloads().OpenBody(ctx, who.Tenant, r.ResponseBody)
		out[r.DeliveryID] = store.AttemptFromRow(r)
	}
	return out, nil
}

// ofTenant keeps the deliveries of the caller's tenant.
func ofTenant(who Caller, ds []sluice.Delivery) []sluice.Delivery {
	out := ds[:0:0]
	for _, d := range ds {
		if d.TenantID == who.Tenant {
			out = append(out, d)
		}
	}
	return out
}

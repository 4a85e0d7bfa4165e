package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// InsertOpEvents is notify.PostOpEvents at the time of the call, for the
// store's UpdateEndpoint, which cannot import notify. It posts
// operational events into a tenant's stream in tx,
// with the fan-out job that makes their deliveries, so that each event
// commits with the transition it reports and is delivered like any other
// (fanout routes it; the job nudges the endpoints after its commit). Each
// is addressed to its endpoint's consumer, if any. The events that email
// the endpoint's owner (sluice.OpEvent.EmailsOwner) queue the email in tx
// too: one notion of owner and one rendering for both (notify).
func InsertOpEvents(ctx context.Context, tx Tx, jobs JobQueue, tenantID uuid.UUID, evs []sluice.OpEvent) error {
	if len(evs) == 0 {
		return nil
	}
	n := len(evs)
	now := time.Now().UTC().Truncate(time.Microsecond)
	p := dbq.InsertEventsParams{
		Ids: make([]uuid.UUID, n), TenantIds: make([]uuid.UUID, n), Types: make([]string, n), Payloads: make([]string, n),
		CoalesceKeys: make([]string, n), Consumers: make([]string, n), HasConsumers: make([]bool, n),
		Broadcasts: make([]bool, n), CreatedAts: make([]time.Time, n),
	}
	for i, ev := range evs {
		payload, err := json.Marshal(ev.Payload)
		if err != nil {
			return fmt.Errorf("encode %s payload: %w", ev.Type, err)
		}
		p.Ids[i], p.TenantIds[i], p.Types[i], p.Payloads[i], p.CreatedAts[i] = NewID(), tenantID, ev.Type, string(payload), now
		if c := ev.Payload.Consumer; c != nil {
			p.Consumers[i], p.HasConsumers[i] = *c, true
		}
	}
	if err := tx.Q.InsertEvents(ctx, p); err != nil {
		return fmt.Errorf("insert operational events: %w", err)
	}
	if err := jobs.FanOut(ctx, tx.Tx, p.Ids); err != nil {
		return fmt.Errorf("queue fan-out of operational events: %w", err)
	}
	for i, ev := range evs {
		if !ev.EmailsOwner() {
			continue
		}
		id := NewID()
		err := tx.Q.InsertAlert(ctx, dbq.InsertAlertParams{
			ID: id, TenantID: tenantID, EndpointID: ev.Payload.EndpointID, EventType: ev.Type, Payload: []byte(p.Payloads[i]),
		})
		if err != nil {
			return fmt.Errorf("insert alert: %w", err)
		}
		if err := jobs.Alert(ctx, tx.Tx, id); err != nil {
			return fmt.Errorf("queue alert: %w", err)
		}
	}
	return nil
}

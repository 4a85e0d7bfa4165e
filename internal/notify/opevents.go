package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Nudger is what posting operational events needs of the process's
// dispatch.Nudger: the jobs it queues in the posting transaction.
type Nudger interface {
	// FanOut queues the fan-out of events to their endpoints.
	FanOut(ctx context.Context, tx pgx.Tx, eventIDs []uuid.UUID) error
	// Alert queues the email of an operational event to its endpoint's
	// owner.
	Alert(ctx context.Context, tx pgx.Tx, alertID uuid.UUID) error
}

// PostOpEvents posts operational events into a tenant's stream in tx,
// created at at, with the fan-out job that makes their deliveries, so that
// each event commits with the transition it reports and is delivered like
// any other (fanout routes it; the job nudges the endpoints after its
// commit). Each is addressed to its endpoint's consumer, if any. The
// events that email the endpoint's owner (sluice.OpEvent.EmailsOwner)
// queue the email in tx too: one notion of owner and one rendering for
// both (AlertWorker). When the store seals payloads, both are stored
// sealed like any event's.
func PostOpEvents(ctx context.Context, tx store.Tx, nudger Nudger, at time.Time, tenantID uuid.UUID, evs []sluice.OpEvent) error {
	if len(evs) == 0 {
		return nil
	}
	n := len(evs)
	at = at.UTC().Truncate(time.Microsecond)
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
		if payload, err = tx.Payloads.Stored(ctx, tenantID, payload); err != nil {
			return fmt.Errorf("seal %s payload: %w", ev.Type, err)
		}
		p.Ids[i], p.TenantIds[i], p.Types[i], p.Payloads[i], p.CreatedAts[i] = store.NewID(), tenantID, ev.Type, string(payload), at
		if c := ev.Payload.Consumer; c != nil {
			p.Consumers[i], p.HasConsumers[i] = *c, true
		}
	}
	if err := tx.Q.InsertEvents(ctx, p); err != nil {
		return fmt.Errorf("insert operational events: %w", err)
	}
	if err := nudger.FanOut(ctx, tx, p.Ids); err != nil {
		return fmt.Errorf("queue fan-out of operational events: %w", err)
	}
	for i, ev := range evs {
		if !ev.EmailsOwner() {
			continue
		}
		id := store.NewID()
		err := tx.Q.InsertAlert(ctx, dbq.InsertAlertParams{
			ID: id, TenantID: tenantID, EndpointID: ev.Payload.EndpointID, EventType: ev.Type, Payload: []byte(p.Payloads[i]),
		})
		if err != nil {
			return fmt.Errorf("insert alert: %w", err)
		}
		if err := nudger.Alert(ctx, tx, id); err != nil {
			return fmt.Errorf("queue alert: %w", err)
		}
	}
	return nil
}

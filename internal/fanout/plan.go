package fanout

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/secretbox"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Events makes the deliveries of stored events, one per (event, endpoint
// subscribed to its type), runs done in the same transaction, and returns
// the endpoints whose queues changed and the number of deliveries created.
// Running it twice for the same events inserts nothing twice. An event with
// a coalesce key replaces the event of a queued, never-attempted delivery
// with the same endpoint, type and key instead of adding one.
//
// The caller dispatches the returned endpoints (dispatch.Nudger.Nudge)
// after the commit, not inside it: River's unique insert locks a live
// dispatch job's row, and holding those locks for a whole fan-out
// transaction convoyed dispatchers and deadlocked with River's completer.
// Doing so after the commit is still race-free; see dispatch.Nudger.Nudge.
func Events(ctx context.Context, st *store.Store, eventIDs []uuid.UUID, done func(ctx context.Context, tx pgx.Tx) error) ([]uuid.UUID, int, error) {
	var (
		created int
		touched []uuid.UUID
	)
	err := st.InRoutingTx(ctx, func(tx store.Tx) error {
		rows, err := tx.Q.EventsByID(ctx, eventIDs)
		if err != nil {
			return fmt.Errorf("read events: %w", err)
		}
		events := make([]dbq.Event, len(rows))
		for i, r := range rows {
			events[i] = dbq.Event(r)
		}
		plan, err := planFanOut(ctx, tx.Q, st.Payloads(), events, 0)
		if err != nil {
			return err
		}
		if touched, created, err = plan.insert(ctx); err != nil {
			return err
		}
		if err := markRouted(ctx, tx.Q, events); err != nil {
			return err
		}
		if done != nil {
			if err := done(ctx, tx.Tx); err != nil {
				return fmt.Errorf("before commit: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("fan out %d events: %w", len(eventIDs), err)
	}
	return touched, created, nil
}

// planFanOut plans, per tenant, the deliveries of events, in id order. An
// event with a coalesce key may take over a queued delivery already in the
// table (fanoutPlan.coalesce): that is written at once, in q's transaction.
//
// With a limit (0: none), a tenant's events that could make more than limit
// deliveries were their filters to let everything through are not planned
// (errOverLimit): the caller leaves them to a fan-out job rather than have
// Postgres evaluate their filters twice.
func planFanOut(ctx context.Context, q *dbq.Queries, pl *secretbox.Payloads, events []dbq.Event, limit int) (*fanoutPlan, error) {
	plan := &fanoutPlan{q: q, pl: pl, touched: map[uuid.UUID]bool{}, batches: map[uuid.UUID]*deliveryBatch{}}
	for tenantID, evs := range byTenant(events) {
		if err := plan.addTenant(ctx, tenantID, evs, limit); err != nil {
			return nil, fmt.Errorf("plan tenant %s: %w", tenantID, err)
		}
	}
	return plan, nil
}

// insert writes the planned deliveries and returns the endpoints whose
// queues changed and the number of deliveries created.
func (p *fanoutPlan) insert(ctx context.Context) ([]uuid.UUID, int, error) {
	created := 0
	for tenantID, batch := range p.batches {
		if len(batch.ids) == 0 {
			continue
		}
		inserted, err := p.q.InsertDeliveries(ctx, batch.params(tenantID))
		if err != nil {
			return nil, 0, fmt.Errorf("insert deliveries: %w", err)
		}
		created += len(inserted)
		for _, id := range inserted {
			p.touched[id] = true
		}
	}
	touched := make([]uuid.UUID, 0, len(p.touched))
	for id := range p.touched {
		touched = append(touched, id)
	}
	return touched, created, nil
}

// fanoutPlan collects the deliveries of a set of events, per tenant.
type fanoutPlan struct {
	q       *dbq.Queries
	pl      *secretbox.Payloads // opens sealed payloads for their filters
	batches map[uuid.UUID]*deliveryBatch
	touched map[uuid.UUID]bool // endpoints whose queue changed
}

// byTenant groups events by tenant, keeping their order.
func byTenant(events []dbq.Event) map[uuid.UUID][]dbq.Event {
	out := map[uuid.UUID][]dbq.Event{}
	for _, ev := range events {
		out[ev.TenantID] = append(out[ev.TenantID], ev)
	}
	return out
}

// addTenant plans the deliveries of one tenant's events with one query for
// the subscriptions they can reach (loadRoutes).
func (p *fanoutPlan) addTenant(ctx context.Context, tenantID uuid.UUID, evs []dbq.Event, limit int) error {
	routes, err := loadRoutes(ctx, p.q, p.pl, tenantID, evs, limit)
	if err != nil {
		return err
	}
	batch := &deliveryBatch{coalesced: map[coalesceKey]int{}}
	p.batches[tenantID] = batch
	for _, ev := range evs {
		for _, endpointID := range routes.endpoints(ev) {
			if ev.CoalesceKey != nil {
				replaced, err := p.coalesce(ctx, batch, ev, endpointID)
				if err != nil {
					return err
				}
				if replaced {
					continue
				}
			}
			batch.add(ev, endpointID)
		}
	}
	return nil
}

// coalesce reports whether ev needs no delivery of its own to endpointID:
// because a newer event with its key already has one, or because it took
// over an older event's queued, never-attempted delivery (in this batch or
// in the table).
func (p *fanoutPlan) coalesce(ctx context.Context, batch *deliveryBatch, ev dbq.Event, endpointID uuid.UUID) (bool, error) {
	key := coalesceKey{endpointID, ev.Type, *ev.CoalesceKey}
	if i, ok := batch.coalesced[key]; ok {
		batch.eventIDs[i] = ev.ID // events come in id order: ev is the newer
		return true, nil
	}
	superseded, err := p.q.NewerCoalescedExists(ctx, dbq.NewerCoalescedExistsParams{
		EndpointID: endpointID, CoalesceKey: ev.CoalesceKey, EventType: ev.Type, EventID: ev.ID,
	})
	if err != nil {
		return false, fmt.Errorf("look for a newer coalesced event: %w", err)
	}
	if superseded {
		return true, nil
	}
	_, err = p.q.CoalesceDelivery(ctx, dbq.CoalesceDeliveryParams{
		EventID: ev.ID, EndpointID: endpointID, EventType: ev.Type, CoalesceKey: ev.CoalesceKey,
	})
	if errors.Is(store.NotFound(err), sluice.ErrNotFound) {
		return false, nil // no queued delivery to take over
	}
	if err != nil {
		return false, fmt.Errorf("coalesce delivery: %w", err)
	}
	p.touched[endpointID] = true
	return true, nil
}

// markRouted forgets events marked unrouted (markUnrouted) once their
// deliveries are made, in the same transaction.
func markRouted(ctx context.Context, q *dbq.Queries, events []dbq.Event) error {
	p := dbq.MarkRoutedParams{TenantIds: make([]uuid.UUID, len(events)), EventIds: make([]uuid.UUID, len(events))}
	for i, ev := range events {
		p.TenantIds[i], p.EventIds[i] = ev.TenantID, ev.ID
	}
	if err := q.MarkRouted(ctx, p); err != nil {
		return fmt.Errorf("mark %d events routed: %w", len(events), err)
	}
	return nil
}

type coalesceKey struct {
	endpointID uuid.UUID
	eventType  string
	key        string
}

// deliveryBatch is the columns of one tenant's new deliveries.
type deliveryBatch struct {
	ids, eventIDs, endpointIDs             []uuid.UUID
	eventTypes, coalesceKeys, orderingKeys []string
	coalesced                              map[coalesceKey]int // index of the batch row holding a key
}

func (b *deliveryBatch) add(ev dbq.Event, endpointID uuid.UUID) {
	key := ""
	if ev.CoalesceKey != nil {
		key = *ev.CoalesceKey
		b.coalesced[coalesceKey{endpointID, ev.Type, key}] = len(b.ids)
	}
	b.ids = append(b.ids, store.NewID())
	b.eventIDs = append(b.eventIDs, ev.ID)
	b.endpointIDs = append(b.endpointIDs, endpointID)
	b.eventTypes = append(b.eventTypes, ev.Type)
	b.coalesceKeys = append(b.coalesceKeys, key)
	b.orderingKeys = append(b.orderingKeys, deref(ev.OrderingKey)) // used only for a FIFO endpoint
}

func (b *deliveryBatch) params(tenantID uuid.UUID) dbq.InsertDeliveriesParams {
	return dbq.InsertDeliveriesParams{
		TenantID: tenantID, Ids: b.ids, EventIds: b.eventIDs, EndpointIds: b.endpointIDs,
		EventTypes: b.eventTypes, CoalesceKeys: b.coalesceKeys, OrderingKeys: b.orderingKeys,
	}
}

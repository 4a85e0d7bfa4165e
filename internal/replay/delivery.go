package replay

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Conflicts of replay and retry with a delivery's state.
var (
	// ErrStillQueued: a pending or failed delivery is not replayed (that
	// would send it twice in parallel); Retry makes it due now.
	ErrStillQueued = fmt.Errorf("%w: the delivery is still queued (pending or failed); retry it to make it due now instead of replaying it", sluice.ErrConflict)
	// ErrEventQueued: the event already has a delivery to this endpoint
	// waiting to be sent, such as an earlier replay.
	ErrEventQueued = fmt.Errorf("%w: a delivery of this event to this endpoint is already queued", sluice.ErrConflict)
	// ErrNotQueued: a delivered or dead delivery has nothing to retry;
	// Delivery sends it again.
	ErrNotQueued = fmt.Errorf("%w: the delivery is %s or %s, so it is not queued; replay it instead", sluice.ErrConflict, sluice.DeliveryDelivered, sluice.DeliveryDead)
)

// Delivery queues a new delivery of the same event to the same endpoint,
// linked to the original by replayed_from. Only a delivered or dead
// delivery is replayed (ErrStillQueued otherwise), and only while no other
// delivery of its event to the endpoint is queued (ErrEventQueued).
func Delivery(ctx context.Context, st *store.Store, tenantID, id uuid.UUID, nudger dispatch.TxNudger) (sluice.Delivery, error) {
	var out sluice.Delivery
	err := st.InTx(ctx, func(tx store.Tx) error {
		src, err := tx.Q.GetDelivery(ctx, dbq.GetDeliveryParams{TenantID: tenantID, ID: id})
		if err != nil {
			return store.NotFound(err)
		}
		if src.Status != sluice.DeliveryDelivered && src.Status != sluice.DeliveryDead {
			return ErrStillQueued
		}
		if err := tx.Q.LockEndpointReplays(ctx, src.EndpointID.String()); err != nil {
			return fmt.Errorf("lock endpoint replays: %w", err)
		}
		queued, err := tx.Q.QueuedDeliveryOfEvent(ctx, dbq.QueuedDeliveryOfEventParams{EventID: src.EventID, EndpointID: src.EndpointID})
		switch {
		case err == nil:
			return fmt.Errorf("%w (delivery %s)", ErrEventQueued, queued)
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("queued delivery of event: %w", err)
		}
		row, err := tx.Q.ReplayDelivery(ctx, dbq.ReplayDeliveryParams{ID: store.NewID(), TenantID: tenantID, SourceID: id})
		if err != nil {
			return store.NotFound(err) // deleted meanwhile, with its endpoint or by retention
		}
		out = store.DeliveryFromRow(row)
		return nudger.Dispatch(ctx, tx.Tx, []uuid.UUID{row.EndpointID})
	})
	return out, err
}

// Retry makes a pending or failed delivery due now, without a new
// delivery, and makes sure its endpoint's dispatcher runs. Flow control
// still applies: an open circuit or a throttle holds it like any other.
// A delivered or dead delivery is ErrNotQueued.
func Retry(ctx context.Context, st *store.Store, tenantID, id uuid.UUID, nudger dispatch.TxNudger) (sluice.Delivery, error) {
	var out sluice.Delivery
	err := st.InTx(ctx, func(tx store.Tx) error {
		d, err := tx.Q.GetDelivery(ctx, dbq.GetDeliveryParams{TenantID: tenantID, ID: id})
		if err != nil {
			return store.NotFound(err)
		}
		// The insert's lock, so a dispatch run finishing right now either
		// sees the delivery due or finishes before Dispatch looks.
		if _, err := tx.Q.LockEndpointKeyShare(ctx, d.EndpointID); err != nil {
			return store.NotFound(err)
		}
		row, err := tx.Q.RetryDelivery(ctx, dbq.RetryDeliveryParams{TenantID: tenantID, ID: id})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if _, gone := tx.Q.GetDelivery(ctx, dbq.GetDeliveryParams{TenantID: tenantID, ID: id}); gone != nil {
				return store.NotFound(gone)
			}
			return ErrNotQueued // delivered or dead, perhaps just now
		case err != nil:
			return fmt.Errorf("retry delivery: %w", err)
		}
		out = store.DeliveryFromRow(row)
		return nudger.Dispatch(ctx, tx.Tx, []uuid.UUID{row.EndpointID})
	})
	return out, err
}

// Newest is the newest replay of a delivery.
type Newest struct {
	ID     uuid.UUID
	Status string
}

// NewestOf returns, for each of the deliveries that has been replayed,
// its newest replay.
func NewestOf(ctx context.Context, st *store.Store, ids []uuid.UUID) (map[uuid.UUID]Newest, error) {
	var rows []dbq.NewestReplaysRow
	err := st.InTx(ctx, func(tx store.Tx) error {
		var err error
		rows, err = tx.Q.NewestReplays(ctx, ids)
		if err != nil {
			return fmt.Errorf("newest replays: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("newest replays: %w", err)
	}
	out := make(map[uuid.UUID]Newest, len(rows))
	for _, r := range rows {
		out[r.SourceID] = Newest{ID: r.ID, Status: r.Status}
	}
	return out, nil
}

package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Conflicts of replay and retry with a delivery's state.
var (
	// ErrStillQueued: a pending or failed delivery is not replayed (that
	// would send it twice in parallel); RetryDelivery makes it due now.
	ErrStillQueued = fmt.Errorf("%w: the delivery is still queued (pending or failed); retry it to make it due now instead of replaying it", sluice.ErrConflict)
	// ErrReplayQueued: the event already has a delivery to this endpoint
	// waiting to be sent, such as an earlier replay.
	ErrReplayQueued = fmt.Errorf("%w: a delivery of this event to this endpoint is already queued", sluice.ErrConflict)
	// ErrNotQueued: a delivered or dead delivery has nothing to retry;
	// ReplayDelivery sends it again.
	ErrNotQueued = fmt.Errorf("%w: the delivery is %s or %s, so it is not queued; replay it instead", sluice.ErrConflict, sluice.DeliveryDelivered, sluice.DeliveryDead)
)

// ReplayDelivery queues a new delivery of the same event to the same
// endpoint, linked to the original by replayed_from. Only a delivered or
// dead delivery is replayed (ErrStillQueued otherwise), and only while no
// other delivery of its event to the endpoint is queued (ErrReplayQueued).
func (s *Store) ReplayDelivery(ctx context.Context, tenantID, id uuid.UUID, jobs JobQueue) (sluice.Delivery, error) {
	var out sluice.Delivery
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		src, err := q.GetDelivery(ctx, dbq.GetDeliveryParams{TenantID: tenantID, ID: id})
		if err != nil {
			return notFound(err)
		}
		if src.Status != sluice.DeliveryDelivered && src.Status != sluice.DeliveryDead {
			return ErrStillQueued
		}
		if err := q.LockEndpointReplays(ctx, src.EndpointID.String()); err != nil {
			return err
		}
		queued, err := q.QueuedDeliveryOfEvent(ctx, dbq.QueuedDeliveryOfEventParams{EventID: src.EventID, EndpointID: src.EndpointID})
		switch {
		case err == nil:
			return fmt.Errorf("%w (delivery %s)", ErrReplayQueued, queued)
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		row, err := q.ReplayDelivery(ctx, dbq.ReplayDeliveryParams{ID: newID(), TenantID: tenantID, SourceID: id})
		if err != nil {
			return notFound(err) // deleted meanwhile, with its endpoint or by retention
		}
		out = deliveryFromRow(row)
		return jobs.Dispatch(ctx, tx, []uuid.UUID{row.EndpointID})
	})
	return out, err
}

// RetryDelivery makes a pending or failed delivery due now, without a new
// delivery, and makes sure its endpoint's dispatcher runs. Flow control
// still applies: an open circuit or a throttle holds it like any other.
// A delivered or dead delivery is ErrNotQueued.
func (s *Store) RetryDelivery(ctx context.Context, tenantID, id uuid.UUID, jobs JobQueue) (sluice.Delivery, error) {
	var out sluice.Delivery
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		d, err := q.GetDelivery(ctx, dbq.GetDeliveryParams{TenantID: tenantID, ID: id})
		if err != nil {
			return notFound(err)
		}
		// The insert's lock, so a dispatch run finishing right now either
		// sees the delivery due or finishes before Dispatch looks.
		if _, err := q.LockEndpointKeyShare(ctx, d.EndpointID); err != nil {
			return notFound(err)
		}
		row, err := q.RetryDelivery(ctx, dbq.RetryDeliveryParams{TenantID: tenantID, ID: id})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if _, gone := q.GetDelivery(ctx, dbq.GetDeliveryParams{TenantID: tenantID, ID: id}); gone != nil {
				return notFound(gone)
			}
			return ErrNotQueued // delivered or dead, perhaps just now
		case err != nil:
			return err
		}
		out = deliveryFromRow(row)
		return jobs.Dispatch(ctx, tx, []uuid.UUID{row.EndpointID})
	})
	return out, err
}

// ReplayEndpoint replays, for each event, the newest delivery to the
// endpoint when it matches f, in one statement whatever their number, and
// returns how many it queued. Events with a delivery to the endpoint still
// queued are skipped, so an identical call made while the first one's
// replays wait queues nothing; concurrent calls for one endpoint take
// turns (LockEndpointReplays) so they cannot both queue.
func (s *Store) ReplayEndpoint(ctx context.Context, tenantID, endpointID uuid.UUID, f sluice.ReplayFilter, jobs JobQueue) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if _, err := q.GetEndpoint(ctx, dbq.GetEndpointParams{TenantID: tenantID, ID: endpointID}); err != nil {
			return notFound(err)
		}
		if err := q.LockEndpointReplays(ctx, endpointID.String()); err != nil {
			return err
		}
		var err error
		n, err = q.ReplayDeliveriesForEndpoint(ctx, dbq.ReplayDeliveriesForEndpointParams{
			TenantID: tenantID, EndpointID: endpointID, Status: f.Status, Since: f.Since, Until: f.Until,
		})
		if err != nil || n == 0 {
			return notFound(err)
		}
		return jobs.Dispatch(ctx, tx, []uuid.UUID{endpointID})
	})
	return n, err
}

// CountReplayable is how many deliveries ReplayEndpoint with f would
// queue now.
func (s *Store) CountReplayable(ctx context.Context, tenantID, endpointID uuid.UUID, f sluice.ReplayFilter) (int64, error) {
	return s.q.CountReplayable(ctx, dbq.CountReplayableParams{
		TenantID: tenantID, EndpointID: endpointID, Status: f.Status, Since: f.Since, Until: f.Until,
	})
}

// Replay is the newest replay of a delivery.
type Replay struct {
	ID     uuid.UUID
	Status string
}

// NewestReplays returns, for each of the deliveries that has been
// replayed, its newest replay.
func (s *Store) NewestReplays(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]Replay, error) {
	rows, err := s.q.NewestReplays(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]Replay, len(rows))
	for _, r := range rows {
		out[r.SourceID] = Replay{ID: r.ID, Status: r.Status}
	}
	return out, nil
}

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
			return fmt.Errorf("lock endpoint replays: %w", err)
		}
		queued, err := q.QueuedDeliveryOfEvent(ctx, dbq.QueuedDeliveryOfEventParams{EventID: src.EventID, EndpointID: src.EndpointID})
		switch {
		case err == nil:
			return fmt.Errorf("%w (delivery %s)", ErrReplayQueued, queued)
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("queued delivery of event: %w", err)
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
			return fmt.Errorf("retry delivery: %w", err)
		}
		out = deliveryFromRow(row)
		return jobs.Dispatch(ctx, tx, []uuid.UUID{row.EndpointID})
	})
	return out, err
}

// Chunks of a bulk replay: the request replays up to InlineReplays of the
// deliveries it chose in its own transaction, and its job the rest,
// ReplayChunk at a time.
const (
	InlineReplays = 1000
	ReplayChunk   = 5000
)

// ReplayEndpoint replays, for each event, the newest delivery to the
// endpoint when it matches f, and returns how many it queued. Events with
// a delivery to the endpoint still queued, or staged by an earlier call
// whose job has not replayed it yet, are skipped, so an identical call made
// while the first one's replays wait queues nothing; concurrent calls for
// one endpoint take turns (LockEndpointReplays) so they cannot both queue.
//
// One statement chooses the deliveries and stages their ids, whatever
// their number (StageReplay); up to InlineReplays of them are replayed at
// once, and the rest by a job (ReplayStaged) inserted in the same
// transaction, so the count is exact and the request stays short.
func (s *Store) ReplayEndpoint(ctx context.Context, tenantID, endpointID uuid.UUID, f sluice.ReplayFilter, jobs JobQueue) (int64, error) {
	var n int32
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if _, err := q.GetEndpoint(ctx, dbq.GetEndpointParams{TenantID: tenantID, ID: endpointID}); err != nil {
			return notFound(err)
		}
		if err := q.LockEndpointReplays(ctx, endpointID.String()); err != nil {
			return fmt.Errorf("lock endpoint replays: %w", err)
		}
		requestID := newID()
		var err error
		n, err = q.StageReplay(ctx, dbq.StageReplayParams{
			ID: requestID, TenantID: tenantID, EndpointID: endpointID, Status: f.Status, Since: f.Since, Until: f.Until,
		})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil // nothing matches
		case err != nil:
			return notFound(err) // the endpoint was deleted meanwhile
		}
		finished, err := replayChunk(ctx, q, tx, requestID, endpointID, InlineReplays, jobs)
		if err != nil || finished {
			return err
		}
		return jobs.Replay(ctx, tx, requestID, endpointID)
	})
	return int64(n), err
}

// ReplayStaged replays the next limit staged deliveries of a bulk replay
// request in one transaction, and reports whether the request is finished
// (its last chunk done, or the request gone with its endpoint). Each
// chunk's replays and its progress commit together, so running it again
// after any failure, or twice, never replays a delivery twice.
func (s *Store) ReplayStaged(ctx context.Context, requestID, endpointID uuid.UUID, limit int, jobs JobQueue) (bool, error) {
	var finished bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		// The insert's lock first, as deleting the endpoint takes it before
		// the request's row: taken the other way round, they deadlock.
		if _, err := q.LockEndpointKeyShare(ctx, endpointID); errors.Is(err, pgx.ErrNoRows) {
			finished = true // deleted, and the request with it
			return nil
		} else if err != nil {
			return fmt.Errorf("lock endpoint key share: %w", err)
		}
		var err error
		finished, err = replayChunk(ctx, q, tx, requestID, endpointID, limit, jobs)
		return err
	})
	return finished, err
}

// replayChunk replays the next limit staged deliveries of a request, records
// the progress (deleting the request with its last chunk), and makes sure
// the endpoint's dispatcher runs.
func replayChunk(ctx context.Context, q *dbq.Queries, tx pgx.Tx, requestID, endpointID uuid.UUID, limit int, jobs JobQueue) (bool, error) {
	req, err := q.LockReplayRequest(ctx, requestID)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil // finished, or deleted with its endpoint
	} else if err != nil {
		return false, fmt.Errorf("lock replay request: %w", err)
	}
	last := min(req.Done+int32(limit), req.Queued)
	n, err := q.ReplayStaged(ctx, dbq.ReplayStagedParams{RequestID: requestID, First: req.Done + 1, Last: last})
	if err != nil {
		return false, notFound(err)
	}
	finished := last == req.Queued
	if finished {
		err = q.DeleteReplayRequest(ctx, requestID)
	} else {
		err = q.AdvanceReplayRequest(ctx, dbq.AdvanceReplayRequestParams{ID: requestID, Done: last})
	}
	if err != nil {
		return finished, fmt.Errorf("advance replay request: %w", err)
	}
	if n == 0 {
		return finished, nil
	}
	return finished, jobs.Dispatch(ctx, tx, []uuid.UUID{endpointID})
}

// CountReplayable is how many deliveries ReplayEndpoint with f would
// queue now.
func (s *Store) CountReplayable(ctx context.Context, tenantID, endpointID uuid.UUID, f sluice.ReplayFilter) (int64, error) {
	n, err := s.q.CountReplayable(ctx, dbq.CountReplayableParams{
		TenantID: tenantID, EndpointID: endpointID, Status: f.Status, Since: f.Since, Until: f.Until,
	})
	if err != nil {
		return 0, fmt.Errorf("count replayable deliveries: %w", err)
	}
	return n, nil
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
		return nil, fmt.Errorf("newest replays: %w", err)
	}
	out := make(map[uuid.UUID]Replay, len(rows))
	for _, r := range rows {
		out[r.SourceID] = Replay{ID: r.ID, Status: r.Status}
	}
	return out, nil
}

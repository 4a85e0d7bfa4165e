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

// Chunks of a bulk replay: the request replays up to Inline of the
// deliveries it chose in its own transaction, and its job the rest, Chunk
// at a time.
const (
	Inline = 1000
	Chunk  = 5000
)

// Endpoint replays, for each event, the newest delivery to the endpoint
// when it matches f, and returns how many it queued. Events with a
// delivery to the endpoint still queued, or staged by an earlier call
// whose job has not replayed it yet, are skipped, so an identical call made
// while the first one's replays wait queues nothing; concurrent calls for
// one endpoint take turns (LockEndpointReplays) so they cannot both queue.
//
// One statement chooses the deliveries and stages their ids, whatever
// their number (StageReplay); up to Inline of them are replayed at once,
// and the rest by a job (Staged) inserted in the same transaction, so the
// count is exact and the request stays short.
func Endpoint(ctx context.Context, st *store.Store, tenantID, endpointID uuid.UUID, f sluice.ReplayFilter, nudger dispatch.TxNudger) (int64, error) {
	var n int32
	err := st.InTx(ctx, func(tx store.Tx) error {
		if _, err := tx.Q.GetEndpoint(ctx, dbq.GetEndpointParams{TenantID: tenantID, ID: endpointID}); err != nil {
			return store.NotFound(err)
		}
		if err := tx.Q.LockEndpointReplays(ctx, endpointID.String()); err != nil {
			return fmt.Errorf("lock endpoint replays: %w", err)
		}
		requestID := store.NewID()
		var err error
		n, err = tx.Q.StageReplay(ctx, dbq.StageReplayParams{
			ID: requestID, TenantID: tenantID, EndpointID: endpointID, Status: f.Status, Since: f.Since, Until: f.Until,
		})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil // nothing matches
		case err != nil:
			return store.NotFound(err) // the endpoint was deleted meanwhile
		}
		finished, err := chunk(ctx, tx, requestID, endpointID, Inline, nudger)
		if err != nil || finished {
			return err
		}
		return nudger.Replay(ctx, tx.Tx, requestID, endpointID)
	})
	return int64(n), err
}

// Staged replays the next limit staged deliveries of a bulk replay request
// in one transaction, and reports whether the request is finished (its
// last chunk done, or the request gone with its endpoint). Each chunk's
// replays and its progress commit together, so running it again after
// any failure, or twice, never replays a delivery twice.
func Staged(ctx context.Context, st *store.Store, requestID, endpointID uuid.UUID, limit int, nudger dispatch.TxNudger) (bool, error) {
	var finished bool
	err := st.InTx(ctx, func(tx store.Tx) error {
		// The insert's lock first, as deleting the endpoint takes it before
		// the request's row: taken the other way round, they deadlock.
		if _, err := tx.Q.LockEndpointKeyShare(ctx, endpointID); errors.Is(err, pgx.ErrNoRows) {
			finished = true // deleted, and the request with it
			return nil
		} else if err != nil {
			return fmt.Errorf("lock endpoint key share: %w", err)
		}
		var err error
		finished, err = chunk(ctx, tx, requestID, endpointID, limit, nudger)
		return err
	})
	return finished, err
}

// chunk replays the next limit staged deliveries of a request, records the
// progress (deleting the request with its last chunk), and makes sure the
// endpoint's dispatcher runs.
func chunk(ctx context.Context, tx store.Tx, requestID, endpointID uuid.UUID, limit int, nudger dispatch.TxNudger) (bool, error) {
	req, err := tx.Q.LockReplayRequest(ctx, requestID)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil // finished, or deleted with its endpoint
	} else if err != nil {
		return false, fmt.Errorf("lock replay request: %w", err)
	}
	last := min(req.Done+int32(limit), req.Queued)
	n, err := tx.Q.ReplayStaged(ctx, dbq.ReplayStagedParams{RequestID: requestID, First: req.Done + 1, Last: last})
	if err != nil {
		return false, store.NotFound(err)
	}
	finished := last == req.Queued
	if finished {
		err = tx.Q.DeleteReplayRequest(ctx, requestID)
	} else {
		err = tx.Q.AdvanceReplayRequest(ctx, dbq.AdvanceReplayRequestParams{ID: requestID, Done: last})
	}
	if err != nil {
		return finished, fmt.Errorf("advance replay request: %w", err)
	}
	if n == 0 {
		return finished, nil
	}
	return finished, nudger.Dispatch(ctx, tx.Tx, []uuid.UUID{endpointID})
}

// CountSettings hold CountReplayable's plan to plain index scans (IndexProbes
// without bitmap scans, which read a whole index range before the first
// row), their pages costed alike in any order (an index in table order
// looks cheaper otherwise, and is read further): so the count reads its
// endpoint's dead entries alone (deliveries_endpoint_dead_idx), and stops
// at its limit.
var CountSettings = append([][2]string{{"enable_bitmapscan", "off"}, {"random_page_cost", "1.1"}}, store.IndexProbes...)

// CountReplayable is how many deliveries Endpoint with f would queue now,
// counted up to sluice.ReplayCountCap+1: a count above the cap says only
// that there are more, and reads no further.
func CountReplayable(ctx context.Context, st *store.Store, tenantID, endpointID uuid.UUID, f sluice.ReplayFilter) (int64, error) {
	var n int64
	err := st.InTxWith(ctx, CountSettings, func(tx store.Tx) error {
		var err error
		n, err = tx.Q.CountReplayable(ctx, dbq.CountReplayableParams{
			TenantID: tenantID, EndpointID: endpointID, Status: f.Status, Since: f.Since, Until: f.Until,
			Most: sluice.ReplayCountCap + 1,
		})
		if err != nil {
			return fmt.Errorf("count replayable: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("count replayable deliveries: %w", err)
	}
	return n, nil
}

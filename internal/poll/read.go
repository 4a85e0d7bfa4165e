package poll

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// errCursorAhead reports a cursor past every position the endpoint has
// given: not one of its own.
var errCursorAhead = errors.New("cursor past the endpoint's last position")

// maxPlaced bounds how many deliveries one read gives positions to, so
// that a read after a long silence stays a short transaction; the rest get
// theirs at the next reads.
const maxPlaced = 1000

// readPage reads a page of a poll endpoint's deliveries after the cursor
// position after, in one transaction under the endpoint's poll_cursors
// row lock (00031_poll_delivery.sql):
//
//  1. give positions, after the last one given, to the deliveries
//     committed since the last read (at most maxPlaced, in event order);
//  2. mark the positioned deliveries up to after still pending as
//     delivered, each with an attempt of status 200: the reader has
//     passed them;
//  3. answer up to limit positioned deliveries after after.
//
// Positions never change, so reading the same cursor again answers the
// same page (with what was placed since after it, when the page was
// short). Readers of one endpoint take turns on the lock. The
// transaction commits durably: a position lost in a crash could be given
// again to another delivery, and a cursor the client holds would then
// skip it. It returns the page and how many deliveries it marked.
func readPage(ctx context.Context, st *store.Store, endpointID uuid.UUID, after int64, limit int) ([]Item, int64, error) {
	var items []Item
	var marked int64
	err := st.InTx(ctx, func(tx store.Tx) error {
		cur, err := tx.Q.LockPollCursor(ctx, endpointID)
		if err != nil {
			return fmt.Errorf("lock poll cursor: %w", store.NotFound(err))
		}
		placed, err := tx.Q.PlacePollDeliveries(ctx, dbq.PlacePollDeliveriesParams{
			LastPosition: cur.LastPosition, EndpointID: endpointID, MaxRows: maxPlaced,
		})
		if err != nil {
			return fmt.Errorf("place poll deliveries: %w", err)
		}
		last := cur.LastPosition
		for _, p := range placed {
			last = max(last, p)
		}
		if after > last {
			return errCursorAhead
		}
		if after > cur.ReadPosition {
			marked, err = tx.Q.MarkPollDelivered(ctx, dbq.MarkPollDeliveredParams{
				EndpointID: endpointID, After: cur.ReadPosition, Upto: after,
			})
			if err != nil {
				return fmt.Errorf("mark poll deliveries delivered: %w", err)
			}
		}
		if last != cur.LastPosition || after > cur.ReadPosition {
			err = tx.Q.SavePollCursor(ctx, dbq.SavePollCursorParams{
				EndpointID: endpointID, LastPosition: last, ReadPosition: after,
			})
			if err != nil {
				return fmt.Errorf("save poll cursor: %w", err)
			}
		}
		rows, err := tx.Q.PollPage(ctx, dbq.PollPageParams{EndpointID: endpointID, After: after, MaxRows: int32(limit), MaxBytes: sluice.MaxPageBytes})
		if err != nil {
			return fmt.Errorf("read poll page: %w", err)
		}
		items = pollItems(rows)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return items, marked, nil
}

package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// ErrCursorAhead reports a poll cursor past every position the endpoint
// has given: not one of its own.
var ErrCursorAhead = errors.New("cursor past the endpoint's last position")

// maxPlaced bounds how many deliveries one poll read gives positions to, so
// that a read after a long silence stays a short transaction; the rest get
// theirs at the next reads.
const maxPlaced = 1000

// PollTarget is what a poll request needs of its endpoint, as it was when
// looked up.
type PollTarget struct {
	EndpointID     uuid.UUID
	TenantID       uuid.UUID
	Poll           bool   // delivery is "poll"
	Secret         string // the current signing secret
	TenantDisabled bool
	// ReadPosition is the furthest cursor a read has passed, LastPosition
	// the last position given, and Unplaced whether deliveries wait for a
	// position: a read with no cursor past ReadPosition writes nothing
	// unless Unplaced, and one at LastPosition has nothing to answer.
	ReadPosition int64
	LastPosition int64
	Unplaced     bool
}

// PollTarget returns the endpoint a poll token names, with its current
// secret; sluice.ErrNotFound if there is none.
func (s *Store) PollTarget(ctx context.Context, endpointID uuid.UUID) (PollTarget, error) {
	row, err := s.q.PollEndpoint(ctx, endpointID)
	if err != nil {
		return PollTarget{}, fmt.Errorf("look up poll endpoint: %w", notFound(err))
	}
	secret, err := s.box.Open(row.SecretEnc)
	if err != nil {
		return PollTarget{}, fmt.Errorf("open poll endpoint's secret: %w", err)
	}
	return PollTarget{
		EndpointID: row.ID, TenantID: row.TenantID, Poll: row.Delivery == sluice.DeliveryPoll,
		Secret: string(secret), TenantDisabled: row.TenantDisabled,
		ReadPosition: row.ReadPosition, LastPosition: row.LastPosition, Unplaced: row.Unplaced,
	}, nil
}

// PollEndpoints returns which of these endpoints are poll endpoints; in
// tx when it is not nil (a caller inside a transaction asks on its own
// connection rather than wait for another).
func (s *Store) PollEndpoints(ctx context.Context, tx pgx.Tx, ids []uuid.UUID) ([]uuid.UUID, error) {
	q := s.q
	if tx != nil {
		q = q.WithTx(tx)
	}
	polls, err := q.PollEndpoints(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("look up poll endpoints: %w", err)
	}
	return polls, nil
}

// PollItem is one delivery on a poll page: its position and its event.
type PollItem struct {
	Position  int64
	EventID   uuid.UUID
	Type      string
	Payload   []byte
	CreatedAt time.Time
}

// ReadPoll reads a page of a poll endpoint's deliveries after the cursor
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
// skip it.
func (s *Store) ReadPoll(ctx context.Context, endpointID uuid.UUID, after int64, limit int) ([]PollItem, int64, error) {
	var items []PollItem
	var marked int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		cur, err := q.LockPollCursor(ctx, endpointID)
		if err != nil {
			return fmt.Errorf("lock poll cursor: %w", notFound(err))
		}
		placed, err := q.PlacePollDeliveries(ctx, dbq.PlacePollDeliveriesParams{
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
			return ErrCursorAhead
		}
		if after > cur.ReadPosition {
			marked, err = q.MarkPollDelivered(ctx, dbq.MarkPollDeliveredParams{
				EndpointID: endpointID, After: cur.ReadPosition, Upto: after,
			})
			if err != nil {
				return fmt.Errorf("mark poll deliveries delivered: %w", err)
			}
		}
		if last != cur.LastPosition || after > cur.ReadPosition {
			err = q.SavePollCursor(ctx, dbq.SavePollCursorParams{
				EndpointID: endpointID, LastPosition: last, ReadPosition: after,
			})
			if err != nil {
				return fmt.Errorf("save poll cursor: %w", err)
			}
		}
		rows, err := q.PollPage(ctx, dbq.PollPageParams{EndpointID: endpointID, After: after, MaxRows: int32(limit)})
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

// PollPage reads up to limit of the endpoint's positioned deliveries after
// the position after, without a transaction: for a read that has nothing
// to write (PollTarget). Positions never change, so it answers what
// ReadPoll would have, less what commits meanwhile, which the next read
// places.
func (s *Store) PollPage(ctx context.Context, endpointID uuid.UUID, after int64, limit int) ([]PollItem, error) {
	rows, err := s.q.PollPage(ctx, dbq.PollPageParams{EndpointID: endpointID, After: after, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("read poll page: %w", err)
	}
	return pollItems(rows), nil
}

func pollItems(rows []dbq.PollPageRow) []PollItem {
	items := make([]PollItem, len(rows))
	for i, r := range rows {
		items[i] = PollItem{Position: r.Place, EventID: r.EventID, Type: r.Type, Payload: r.Payload, CreatedAt: r.CreatedAt}
	}
	return items
}

// PollCursor is how far a poll endpoint has been read: the last position
// given, the furthest cursor a reader passed and when.
type PollCursor struct {
	LastPosition int64
	ReadPosition int64
	ReadAt       *time.Time
}

// PollCursor returns how far a poll endpoint has been read.
func (s *Store) PollCursor(ctx context.Context, endpointID uuid.UUID) (PollCursor, error) {
	row, err := s.q.PollCursor(ctx, endpointID)
	if err != nil {
		return PollCursor{}, fmt.Errorf("read poll cursor: %w", notFound(err))
	}
	return PollCursor(row), nil
}

package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

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

// PollPage reads up to limit of the endpoint's positioned deliveries after
// the position after, without a transaction: for a read that has nothing
// to write (package poll places and marks in a transaction of its own).
func (s *Store) PollPage(ctx context.Context, endpointID uuid.UUID, after int64, limit int) ([]PollItem, error) {
	rows, err := s.q.PollPage(ctx, dbq.PollPageParams{EndpointID: endpointID, After: after, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("read poll page: %w", err)
	}
	return PollItems(rows), nil
}

// PollItems maps rows of the PollPage statement.
func PollItems(rows []dbq.PollPageRow) []PollItem {
	items := make([]PollItem, len(rows))
	for i, r := range rows {
		items[i] = PollItem{Position: r.Place, EventID: r.EventID, Type: r.Type, Payload: r.Payload, CreatedAt: r.CreatedAt}
	}
	return items
}

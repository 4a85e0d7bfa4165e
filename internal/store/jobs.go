package store

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// JobQueue inserts the background jobs a write needs, in the write's own
// transaction, so the data and the job that acts on it commit together.
type JobQueue interface {
	// FanOut queues the fan-out of events to their endpoints.
	FanOut(ctx context.Context, tx pgx.Tx, eventIDs []uuid.UUID) error
	// Dispatch makes sure each endpoint has a dispatch job queued or running.
	Dispatch(ctx context.Context, tx pgx.Tx, endpointIDs []uuid.UUID) error
	// DispatchLive is Dispatch, returning the endpoints whose job was
	// already queued or running.
	DispatchLive(ctx context.Context, tx pgx.Tx, endpointIDs []uuid.UUID) ([]uuid.UUID, error)
	// Replay queues the job that replays a bulk replay request's staged
	// deliveries to the endpoint.
	Replay(ctx context.Context, tx pgx.Tx, requestID, endpointID uuid.UUID) error
	// Alert queues the email of a circuit transition.
	Alert(ctx context.Context, tx pgx.Tx, alertID uuid.UUID) error
	// MemberMail queues the email that carries a member's link to set its
	// password (purpose: member.PurposeInvite or member.PurposeReset).
	MemberMail(ctx context.Context, tx pgx.Tx, memberID uuid.UUID, purpose string) error
	// Unpark runs an endpoint's dispatch now: its parked job if it has one
	// (parkedJobID), a new one otherwise.
	Unpark(ctx context.Context, tx pgx.Tx, endpointID uuid.UUID, parkedJobID *int64) error
}

// TxHook runs inside a store transaction just before it commits, such as a
// River job completing itself in the same transaction as its work.
type TxHook func(ctx context.Context, tx pgx.Tx) error

package store

import (
	"context"
	"fmt"
	"github.com/sluice-dev/sluice/internal/flow"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// The generated statements are shared persistence; a package that owns
// the only use of some of them (package maintenance, the partition
// changes) runs them through these, in transactions it shapes itself.

// Queries are the generated statements on the store's pool.
func (s *Store) Queries() *dbq.Queries { return s.q }

// InQueriesTx runs fn in a transaction, committing if it returns nil, with
// the generated statements bound to the transaction.
func (s *Store) InQueriesTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx, q *dbq.Queries) error) error {
	return s.inTx(ctx, func(tx pgx.Tx) error { return fn(ctx, tx, s.q.WithTx(tx)) })
}

// Tx is one of the store's transactions, handed to a package that makes
// its own decisions inside one (fanout, dispatch): Q runs the sqlc queries
// in it, and the embedded pgx.Tx is there for COPY and for River's inserts,
// which commit with the rest.
type Tx struct {
	pgx.Tx
	Q *dbq.Queries
}

// WithTx runs fn in a transaction, committing if it returns nil.
func (s *Store) WithTx(ctx context.Context, fn func(Tx) error) error {
	return s.inTx(ctx, func(tx pgx.Tx) error { return fn(Tx{Tx: tx, Q: s.q.WithTx(tx)}) })
}

// Begin begins a transaction the caller commits or rolls back: for steps
// that decide between their statements (dispatch). opts.BeginQuery may set
// settings for the transaction (SetLocal).
func (s *Store) Begin(ctx context.Context, opts pgx.TxOptions) (Tx, error) {
	tx, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		return Tx{}, fmt.Errorf("begin: %w", err)
	}
	return Tx{Tx: tx, Q: s.q.WithTx(tx)}, nil
}

// SetLocal is what follows BEGIN in a BeginQuery to set settings for the
// transaction alone: one round trip for BEGIN and the settings.
func SetLocal(settings [][2]string) string { return setLocal(settings) }

// OneShot returns the generated statements on the store's pool, each run
// alone with settings (see oneShot).
func (s *Store) OneShot(settings [][2]string) *dbq.Queries {
	return dbq.New(newOneShot(s.pool, settings))
}

// OpenSecret decrypts a secret the store sealed (an endpoint's signing
// secret).
func (s *Store) OpenSecret(sealed []byte) ([]byte, error) {
	secret, err := s.box.Open(sealed)
	if err != nil {
		return nil, fmt.Errorf("open secret: %w", err)
	}
	return secret, nil
}

// EndpointRateLimit is an endpoint row's rate limit; nil when it has none.
func EndpointRateLimit(e dbq.Endpoint) *sluice.RateLimit {
	return rateLimitOf(e)
}

// EndpointAdaptive is an endpoint row's adaptive rate state (the zero
// value when it has not slowed down).
func EndpointAdaptive(e dbq.Endpoint) flow.Adaptive {
	var a flow.Adaptive
	if e.AdaptiveRate != nil && e.AdaptiveRateAt != nil {
		a.Rate, a.At = *e.AdaptiveRate, *e.AdaptiveRateAt
	}
	if e.AdaptiveHalvedAt != nil {
		a.HalvedAt = *e.AdaptiveHalvedAt
	}
	return a
}

// WithRoutingTx is WithTx for a transaction that routes events to their
// endpoints (SubscriptionsForEvents) and makes their deliveries, held to
// IndexProbes: the routing query's generic plan, made without knowing the
// post's types, would otherwise read every subscription and endpoint of
// the tenant and join them by hash, where the index of subscription
// patterns finds the few that match and each endpoint is one probe of its
// key (TestRoutingReadsOnlyMatchingSubscriptions).
// One round trip: BEGIN and the settings go as one simple-protocol query.
func (s *Store) WithRoutingTx(ctx context.Context, fn func(Tx) error) error {
	return s.inTxWith(ctx, pgx.TxOptions{BeginQuery: "BEGIN" + setLocal(IndexProbes)}, func(tx pgx.Tx) error {
		return fn(Tx{Tx: tx, Q: s.q.WithTx(tx)})
	})
}

// Routed runs one statement alone (oneShot), held to IndexProbes as
// WithRoutingTx holds a transaction: for a small group of events stored,
// routed and fanned out in one statement (InsertRoutedEvents).
func (s *Store) Routed() *dbq.Queries { return s.routed }

// NotFound turns pgx.ErrNoRows (and a foreign key violation) into
// sluice.ErrNotFound, for the code that runs queries in a Tx.
func NotFound(err error) error { return notFound(err) }

// NewID returns a time-ordered id, as the store gives every row it makes.
func NewID() uuid.UUID { return newID() }

// InsertEvent stores one event in the transaction, as posted.
func (t Tx) InsertEvent(ctx context.Context, tenantID uuid.UUID, ev sluice.NewEvent) (sluice.Event, error) {
	row, err := insertEvent(ctx, t.Q, tenantID, ev)
	if err != nil {
		return sluice.Event{}, fmt.Errorf("insert event: %w", err)
	}
	return eventFromRow(row), nil
}

// EventFromRow is an events row as the domain's Event.
func EventFromRow(r dbq.Event) sluice.Event { return eventFromRow(r) }

// DeliveryFromRow is a deliveries row as the domain's Delivery, for the
// code that runs queries in a Tx (package replay).
func DeliveryFromRow(r dbq.Delivery) sluice.Delivery { return deliveryFromRow(r) }

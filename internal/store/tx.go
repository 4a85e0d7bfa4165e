package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/secretbox"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// The ways into the database. InTx is the way in; each other one exists
// for a reason a test or a measurement holds, and is named for it:
//
//   - InRoutingTx: a transaction held to IndexProbes, for routing;
//   - InAsyncTx: a transaction whose commit does not wait for the WAL
//     flush, for the Nudger's dispatch jobs;
//   - BeginStep: a transaction its caller commits, for a dispatch step
//     that decides between its statements;
//   - OneShot: statements each run alone on connections that carry
//     settings (settled.go), for dispatch's claims and records and routed
//     inserts;
//   - Change (change.go): the control layer's, one operation and its
//     audit entry.

// Tx is one of the store's transactions, handed to the package that makes
// the decisions inside it: Q runs the generated statements in it, and the
// embedded pgx.Tx is there for COPY and for River's inserts, which commit
// with the rest. Payloads seals what the caller writes itself (nil when
// the store seals nothing).
type Tx struct {
	pgx.Tx
	Q        *dbq.Queries
	Payloads *secretbox.Payloads
}

// InTx runs fn in a transaction, committing if it returns nil. Inside a
// change (Change) fn runs in a savepoint of the change's transaction.
func (s *Store) InTx(ctx context.Context, fn func(Tx) error) error {
	return s.inTx(ctx, func(tx pgx.Tx) error { return fn(s.tx(tx)) })
}

// InRoutingTx is InTx for a transaction that routes events to their
// endpoints (SubscriptionsForEvents) and makes their deliveries, held to
// IndexProbes: the routing query's generic plan, made without knowing the
// post's types, would otherwise read every subscription and endpoint of
// the tenant and join them by hash, where the index of subscription
// patterns finds the few that match and each endpoint is one probe of its
// key (TestRoutingReadsOnlyMatchingSubscriptions).
// One round trip: BEGIN and the settings go as one simple-protocol query.
func (s *Store) InRoutingTx(ctx context.Context, fn func(Tx) error) error {
	return s.inTxWith(ctx, pgx.TxOptions{BeginQuery: "BEGIN" + setLocal(IndexProbes)}, func(tx pgx.Tx) error {
		return fn(s.tx(tx))
	})
}

// InTxWith is InTx with settings for the transaction alone (SET LOCAL).
func (s *Store) InTxWith(ctx context.Context, settings [][2]string, fn func(Tx) error) error {
	return s.inTxWith(ctx, pgx.TxOptions{BeginQuery: "BEGIN" + setLocal(settings)}, func(tx pgx.Tx) error { return fn(s.tx(tx)) })
}

// asyncCommit begins a transaction whose commit does not wait for the WAL
// flush, BEGIN and the setting in one round trip.
const asyncCommit = "BEGIN; SET LOCAL synchronous_commit = off"

// InAsyncTx is InTx for a transaction whose loss in a Postgres crash is
// harmless: its commit does not wait for the WAL flush
// (synchronous_commit = off, for this transaction only). It is for the
// dispatch jobs the Nudger queues, which the sweeper's walk queues again
// if a crash loses them. Events commit synchronously, so such a loss
// never loses an accepted event; and Postgres commits in order, so a
// later synchronous commit makes every earlier one durable too.
func (s *Store) InAsyncTx(ctx context.Context, fn func(Tx) error) error {
	return s.inTxWith(ctx, pgx.TxOptions{BeginQuery: asyncCommit}, func(tx pgx.Tx) error { return fn(s.tx(tx)) })
}

// BeginStep begins a transaction the caller commits or rolls back, on a
// pool whose connections carry settings (see settled): for a dispatch
// step, which decides between its statements and ends with a commit or a
// rollback of its own choosing. Behind a pooler the settings are set for
// the transaction instead, in BEGIN's round trip.
func (s *Store) BeginStep(ctx context.Context, settings [][2]string) (Tx, error) {
	var opts pgx.TxOptions
	if s.pooled && len(settings) > 0 {
		opts.BeginQuery = "BEGIN" + setLocal(settings)
	}
	tx, err := s.poolWith(settings).BeginTx(ctx, opts)
	if err != nil {
		return Tx{}, fmt.Errorf("begin: %w", err)
	}
	return s.tx(tx), nil
}

func (s *Store) tx(tx pgx.Tx) Tx { return Tx{Tx: tx, Q: s.q.WithTx(tx), Payloads: s.payloads} }

// OpenSecret decrypts a secret the store sealed (an endpoint's signing
// secret).
func (s *Store) OpenSecret(sealed []byte) ([]byte, error) {
	secret, err := s.box.Open(sealed)
	if err != nil {
		return nil, fmt.Errorf("open secret: %w", err)
	}
	return secret, nil
}

// Routed runs one statement alone with routedSettings, made once: for a
// small group of events stored, routed and fanned out in one statement
// (InsertRoutedEvents), whose plan the settings hold.
func (s *Store) Routed() *dbq.Queries { return s.routed() }

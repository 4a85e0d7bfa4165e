// Package store is all of Sluice's SQL access. It speaks domain types from
// package sluice; the sqlc-generated code in store/dbq leaves it only in a
// Tx handed to fanout, and pgx.ErrNoRows becomes sluice.ErrNotFound here
// (NotFound) and nowhere else.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-dev/sluice/internal/secretbox"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Store reads and writes Sluice's tables. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	q    *dbq.Queries
	box  *secretbox.Box

	// groupClaim runs a statement alone (oneShot) with Postgres's generic
	// plan, made once per connection, instead of one planned for each
	// call's values: for the group claim, whose plan is the same for any
	// endpoints and limits (each week's claim index read in order,
	// TestClaimPlanDoesNotDependOnTheBacklog), and whose planning across
	// the partitions cost four times its execution. Forced on every
	// statement, generic plans made others 10 to 100 times slower.
	groupClaim *dbq.Queries
	// plainRecord runs a statement alone with recordSettings: for the plain
	// record of attempts.
	plainRecord *dbq.Queries
	// routed runs a statement alone held to index probes (Routed).
	routed *dbq.Queries
}

// New returns a Store on pool that encrypts secrets with box.
func New(pool *pgxpool.Pool, box *secretbox.Box) *Store {
	return &Store{
		pool: pool, q: dbq.New(pool), box: box,
		groupClaim:  dbq.New(newOneShot(pool, [][2]string{GenericPlan})),
		plainRecord: dbq.New(newOneShot(pool, recordSettings)),
		routed:      dbq.New(newOneShot(pool, IndexProbes)),
	}
}

// Pool is the connection pool the store uses, for River and health checks.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}

// notFound turns pgx.ErrNoRows into sluice.ErrNotFound, and so a foreign
// key violation (SQLSTATE 23503): a row the statement refers to is gone,
// deleted by a concurrent transaction after it was looked up.
func notFound(err error) error {
	var pgErr *pgconn.PgError
	if errors.Is(err, pgx.ErrNoRows) || errors.As(err, &pgErr) && pgErr.Code == "23503" {
		return sluice.ErrNotFound
	}
	return err
}

// newID returns a time-ordered id, so that "newest first" is "highest id
// first" and cursors are plain ids.
func newID() uuid.UUID {
	return uuid.Must(uuid.NewV7())
}

// limitRows asks for one row more than the page holds, to learn whether a
// next page exists.
func limitRows(p sluice.PageParams) int32 {
	return int32(p.Limit) + 1
}

// page cuts rows fetched with limitRows into a Page.
func page[R, T any](rows []R, p sluice.PageParams, id func(R) uuid.UUID, conv func(R) (T, error)) (sluice.Page[T], error) {
	out := sluice.Page[T]{Items: make([]T, 0, min(len(rows), p.Limit))}
	for i, r := range rows {
		if i == p.Limit {
			next := id(rows[i-1])
			out.Next = &next
			break
		}
		item, err := conv(r)
		if err != nil {
			return out, err
		}
		out.Items = append(out.Items, item)
	}
	return out, nil
}

// InTx runs fn in a transaction, committing if it returns nil: for work
// that is only River's (a job completing itself and queueing its successor).
func (s *Store) InTx(ctx context.Context, fn func(context.Context, pgx.Tx) error) error {
	return s.inTx(ctx, func(tx pgx.Tx) error { return fn(ctx, tx) })
}

// inTx runs fn in a transaction, committing if it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.inTxWith(ctx, pgx.TxOptions{}, fn)
}

func (s *Store) inTxWith(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// inAsyncTx is inTx for a transaction whose loss in a Postgres crash is
// harmless: its commit does not wait for the WAL flush
// (synchronous_commit = off, for this transaction only). The dispatcher's
// claims and attempt records use it: losing one at a crash means a delivery
// is sent again, which at-least-once delivery allows, and never that an
// accepted event is lost, since events commit synchronously. Postgres
// still commits these in order, so a later synchronous commit makes every
// earlier one durable too.
func (s *Store) inAsyncTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.inTxWith(ctx, pgx.TxOptions{BeginQuery: asyncCommit}, fn)
}

// IndexProbes hold the planner, for the rest of a transaction, to nested
// loops over index probes: hash and merge joins and sequential scans off.
// The transactions that set them run only statements that look rows up by
// key or by an index of their own, whose plans a generic plan or stale
// statistics could otherwise turn into reads of whole tables.
var IndexProbes = [][2]string{
	{"enable_hashjoin", "off"},
	{"enable_mergejoin", "off"},
	{"enable_seqscan", "off"},
}

// GenericPlan has prepared statements run Postgres's generic plan, made
// once per connection, instead of one planned for each call's values.
var GenericPlan = [2]string{"plan_cache_mode", "force_generic_plan"}

// setLocal writes settings for a transaction's BeginQuery as one statement
// after BEGIN: "; SELECT set_config('name', 'value', true), …", which is
// what SET LOCAL does for each.
func setLocal(settings [][2]string) string {
	calls := make([]string, len(settings))
	for i, s := range settings {
		calls[i] = fmt.Sprintf("set_config('%s', '%s', true)", s[0], s[1])
	}
	return "; SELECT " + strings.Join(calls, ", ")
}

// recordSettings are what RecordOutcomes runs with. It commits
// asynchronously (see inAsyncTx). It runs its generic plan, made once per
// connection, rather than planning each call (0.3 ms across the weekly
// partitions). And that plan finds each delivery with one probe of its
// week's primary key, by a nested loop over the attempts: with hash and
// merge joins and sequential scans off, Postgres cannot plan to read
// partitions whole instead, as it did when the plan was made while the
// week's partition was small and then kept as it grew: every record of 15
// attempts then read the whole partition, 2 to 4 ms a call on a fresh
// database (TestRecordPlanDoesNotDependOnStatistics).
var recordSettings = append([][2]string{{"synchronous_commit", "off"}}, keyLookups...)

// keyLookups are the settings of transactions whose statements all look
// rows up by key (the dispatch steps): the generic plan, made once per
// connection, held to nested loops over index probes.
var keyLookups = append([][2]string{GenericPlan}, IndexProbes...)

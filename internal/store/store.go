// Package store is Sluice's shared SQL access: rows mapped to the domain
// types of package sluice, and the ways into a transaction (tx.go). It
// makes no decisions and imports no domain package (TestStoreImports):
// the packages that decide (control, poll, notify, fanout, dispatch,
// replay, maintenance) run the sqlc-generated statements of store/dbq in
// a Tx, or one alone (Read, Exec, ExecRows). pgx.ErrNoRows becomes
// sluice.ErrNotFound here (NotFound) and nowhere else.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

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
	// payloads seals and opens what tenants send and receive
	// (SealPayloads); nil: nothing is sealed, and a sealed value is an error.
	payloads *secretbox.Payloads

	settled settled // pools whose connections carry settings (OneShot)
	pooled  bool    // behind a transaction pooler (BehindPooler)
	// routed runs a statement alone with routedSettings (Routed).
	routed func() *dbq.Queries
}

// New returns a Store on pool that encrypts secrets with box.
func New(pool *pgxpool.Pool, box *secretbox.Box) *Store {
	s := &Store{pool: pool, q: dbq.New(ctxDB{pool}), box: box}
	s.routed = sync.OnceValue(func() *dbq.Queries { return s.OneShot(routedSettings) })
	return s
}

// SealPayloads has the store open (and, when p is sealing, seal) event
// payloads, response bodies and endpoint headers with p.
func (s *Store) SealPayloads(p *secretbox.Payloads) { s.payloads = p }

// Payloads is what SealPayloads gave, or nil.
func (s *Store) Payloads() *secretbox.Payloads { return s.payloads }

// Pool is the connection pool the store uses: River's driver and the
// statements package jobs runs on River's own tables take it. The store's
// tables are reached through a transaction (InTx) or the store's methods.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}

// Read runs one generated statement that only reads, named by its method
// expression (such as (*dbq.Queries).GetTenant), with arg: on the pool, or
// in the change ctx belongs to. pgx.ErrNoRows comes back as
// sluice.ErrNotFound. It is for a read whose caller maps the row itself.
func Read[A, R any](ctx context.Context, s *Store, stmt func(*dbq.Queries, context.Context, A) (R, error), arg A) (R, error) {
	row, err := stmt(s.q, ctx, arg)
	return row, NotFound(err)
}

// Exec is Read for a statement that writes and returns nothing (sqlc's
// :exec), such as (*dbq.Queries).DeleteDashboardSession. It is for a write
// whose caller needs no mapping.
func Exec[A any](ctx context.Context, s *Store, stmt func(*dbq.Queries, context.Context, A) error, arg A) error {
	return NotFound(stmt(s.q, ctx, arg))
}

// ExecRows is Exec for a statement that is to change one row and returns
// how many it changed (sqlc's :execrows), such as
// (*dbq.Queries).DeleteConsumer: one that changed none is
// sluice.ErrNotFound.
func ExecRows[A any](ctx context.Context, s *Store, stmt func(*dbq.Queries, context.Context, A) (int64, error), arg A) error {
	n, err := stmt(s.q, ctx, arg)
	if err == nil && n == 0 {
		return sluice.ErrNotFound
	}
	return NotFound(err)
}

// NotFound turns pgx.ErrNoRows into sluice.ErrNotFound, and so a foreign
// key violation (SQLSTATE 23503): a row the statement refers to is gone,
// deleted by a concurrent transaction after it was looked up. The code
// that runs queries in a Tx calls it too.
func NotFound(err error) error {
	var pgErr *pgconn.PgError
	if errors.Is(err, pgx.ErrNoRows) || errors.As(err, &pgErr) && pgErr.Code == "23503" {
		return sluice.ErrNotFound
	}
	return err
}

// NewID returns a time-ordered id, as the store gives every row it makes,
// so that "newest first" is "highest id first" and cursors are plain ids.
func NewID() uuid.UUID {
	return uuid.Must(uuid.NewV7())
}

// limitRows asks for one row more than the page holds, to learn whether a
// next page exists.
func limitRows(p sluice.PageParams) int32 {
	return int32(p.Limit) + 1
}

// Page cuts rows fetched one past the page's limit (limitRows) into a
// page: the extra row, when there is one, says that a next page exists.
func Page[R, T any](rows []R, p sluice.PageParams, id func(R) uuid.UUID, conv func(R) (T, error)) (sluice.Page[T], error) {
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

// inTx runs fn in a transaction, committing if it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.inTxWith(ctx, pgx.TxOptions{}, fn)
}

// inTxWith is inTx with options: a BeginQuery that sets settings for the
// transaction.
//
// Inside a change (Change) it runs fn in a savepoint of the change's
// transaction instead, and opts' settings are not applied: the change
// commits once, durably, with its audit entry.
func (s *Store) inTxWith(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	begin := func() (pgx.Tx, error) { return s.pool.BeginTx(ctx, opts) }
	if ch := changeTx(ctx); ch != nil {
		begin = func() (pgx.Tx, error) { return ch.Begin(ctx) }
	}
	tx, err := begin()
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

// IndexProbes hold the planner, for the rest of a transaction, to nested
// loops over index probes: hash and merge joins and sequential scans off.
// The transactions that set them run only statements that look rows up by
// key or by an index of their own, whose plans a generic plan or stale
// statistics could otherwise turn into reads of whole tables. JIT is off
// with them: a plan that keeps a sequential scan (of a handful of rows)
// carries the scan's disable cost, far past jit_above_cost, and compiling
// it would take longer than the statement.
var IndexProbes = [][2]string{
	{"enable_hashjoin", "off"},
	{"enable_mergejoin", "off"},
	{"enable_seqscan", "off"},
	{"jit", "off"},
}

// GenericPlan has prepared statements run Postgres's generic plan, made
// once per connection, instead of one planned for each call's values.
var GenericPlan = [2]string{"plan_cache_mode", "force_generic_plan"}

// routedSettings are Routed's: IndexProbes, and the generic plan, which
// the routing plan tests pin. Left to choose, Postgres re-planned
// InsertRoutedEvents for every post of a tenant with many subscriptions
// (its generic plan's estimate, made for arrays of unknown length, is
// dearer than a plan made for one event), and planning the statement costs
// more than running it (TestOneStatementSettlesOnItsGenericPlan).
var routedSettings = append([][2]string{GenericPlan}, IndexProbes...)

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

package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// A change is one request's writes and their audit entry, committed
// together: Change opens a transaction and puts it in the context it hands
// the request, and every statement the store runs with that context joins
// it (ctxDB, inTxWith). The request does not need to know: the store's
// methods are the same with or without a change around them, which is how
// one middleware audits every route.

type changeKey struct{}

// changeTx is the transaction of the change ctx belongs to, or nil.
func changeTx(ctx context.Context) pgx.Tx {
	tx, _ := ctx.Value(changeKey{}).(pgx.Tx)
	return tx
}

// Change runs fn in a transaction that every store call made with the
// context fn receives joins. If fn returns an entry, the entry is
// inserted as it is (its ID and time are the caller's) in that
// transaction, which then commits; if it returns an
// error, the transaction rolls back and Change returns the error. A
// change Postgres rolled back to break a deadlock with a concurrent one
// (SQLSTATE 40P01) is run again, up to changeAttempts times: nothing of
// it was written, and fn keeps no state of its own across a run.
func (s *Store) Change(ctx context.Context, tenant uuid.UUID, fn func(ctx context.Context) (*sluice.AuditEntry, error)) error {
	if changeTx(ctx) != nil {
		return errors.New("change: already in a change")
	}
	for attempt := 1; ; attempt++ {
		err := s.change(ctx, tenant, fn)
		var pgErr *pgconn.PgError
		if attempt < changeAttempts && errors.As(err, &pgErr) && pgErr.Code == "40P01" {
			continue
		}
		return err
	}
}

// changeAttempts is how often Change runs a change that lost a deadlock.
const changeAttempts = 3

func (s *Store) change(ctx context.Context, tenant uuid.UUID, fn func(ctx context.Context) (*sluice.AuditEntry, error)) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin change: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	entry, err := fn(context.WithValue(ctx, changeKey{}, tx))
	if err != nil {
		return err
	}
	if entry != nil {
		if err := s.q.WithTx(tx).InsertAuditEntry(ctx, dbq.InsertAuditEntryParams{
			ID: entry.ID, TenantID: tenant, At: entry.At,
			ActorType: entry.Actor.Type, ActorID: entry.Actor.ID, ActorName: entry.Actor.Name,
			Action: entry.Action, ObjectID: entry.ObjectID, SourceIp: entry.SourceIP, Changed: entry.Changed,
		}); err != nil {
			return fmt.Errorf("insert audit entry: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit change: %w", err)
	}
	return nil
}

// ctxDB runs each statement in the change its context belongs to, if any,
// and on the pool otherwise. The store's generated statements run on it.
type ctxDB struct{ pool *pgxpool.Pool }

func (d ctxDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if tx := changeTx(ctx); tx != nil {
		return tx.Exec(ctx, sql, args...) //nolint:wrapcheck // a dbq.DBTX passes errors through
	}
	return d.pool.Exec(ctx, sql, args...) //nolint:wrapcheck // a dbq.DBTX passes errors through
}

func (d ctxDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if tx := changeTx(ctx); tx != nil {
		return tx.Query(ctx, sql, args...) //nolint:wrapcheck // a dbq.DBTX passes errors through
	}
	return d.pool.Query(ctx, sql, args...) //nolint:wrapcheck // a dbq.DBTX passes errors through
}

func (d ctxDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if tx := changeTx(ctx); tx != nil {
		return tx.QueryRow(ctx, sql, args...)
	}
	return d.pool.QueryRow(ctx, sql, args...)
}

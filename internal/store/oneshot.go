package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// oneShot runs each statement alone, with settings changed for it, in one
// round trip: a pgx batch of one statement of set_config(name, value, true)
// calls, one per setting, and the statement. A batch is one implicit
// transaction (everything up to its Sync), so the settings hold for the
// statement and its commit, and are gone afterwards. It replaces BEGIN;
// SET LOCAL …; the statement; COMMIT, three round trips, for the
// dispatcher's most frequent statements: the group claim, which wants the
// generic plan, and the unlocked record, which commits asynchronously.
//
// It implements dbq.DBTX for Exec and Query, which is all those
// statements use.
type oneShot struct {
	pool    *pgxpool.Pool
	setSQL  string // SELECT set_config($1, $2, true), set_config($3, $4, true), …
	setArgs []any  // name, value, name, value, …
}

// newOneShot returns a oneShot changing settings (name, value pairs).
func newOneShot(pool *pgxpool.Pool, settings [][2]string) oneShot {
	o := oneShot{pool: pool}
	calls := make([]string, len(settings))
	for i, s := range settings {
		calls[i] = fmt.Sprintf("set_config($%d, $%d, true)", 2*i+1, 2*i+2)
		o.setArgs = append(o.setArgs, s[0], s[1])
	}
	if len(calls) > 0 {
		o.setSQL = "SELECT " + strings.Join(calls, ", ")
	}
	return o
}

func (o oneShot) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	if o.setSQL != "" {
		b.Queue(o.setSQL, o.setArgs...)
	}
	b.Queue(sql, args...)
	br := o.pool.SendBatch(ctx, b)
	if o.setSQL != "" {
		if _, err := br.Exec(); err != nil {
			return nil, errors.Join(err, br.Close())
		}
	}
	return br, nil
}

// Exec runs sql and reports its commit's outcome too.
func (o oneShot) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, err := o.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	return tag, errors.Join(err, br.Close())
}

// Query runs sql; closing its rows ends the batch.
func (o oneShot) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, err := o.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, errors.Join(err, br.Close())
	}
	return &oneShotRows{Rows: rows, br: br}, nil
}

// QueryRow runs sql and reads its first row.
func (o oneShot) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := o.Query(ctx, sql, args...)
	return oneShotRow{rows: rows, err: err}
}

type oneShotRow struct {
	rows pgx.Rows
	err  error
}

func (r oneShotRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// oneShotRows ends its batch when it is closed, and once read to the end
// (when Err is asked, as generated code does after its loop), reporting
// the batch's outcome with its own.
type oneShotRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *oneShotRows) Close() {
	r.Rows.Close()
	if !r.closed {
		r.closed = true
		r.err = r.br.Close()
	}
}

func (r *oneShotRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	r.Close()
	return r.err
}

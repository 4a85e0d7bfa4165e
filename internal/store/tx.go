package store

import (
	"context"

	"github.com/jackc/pgx/v5"

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

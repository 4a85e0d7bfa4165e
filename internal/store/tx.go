package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// InAsyncTx runs fn in a transaction whose commit does not wait for the
// WAL flush (inAsyncTx): for River's inserts that dispatch.Nudger.Nudge
// makes, which the sweeper's walk repeats if a crash loses them.
func (s *Store) InAsyncTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.inAsyncTx(ctx, fn)
}

package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Notify sends payload on a Postgres notification channel; inside a change
// (Change), when the change commits.
func (s *Store) Notify(ctx context.Context, channel, payload string) error {
	if _, err := (ctxDB{s.pool}).Exec(ctx, "SELECT pg_notify($1, $2)", channel, payload); err != nil {
		return fmt.Errorf("notify %s: %w", channel, err)
	}
	return nil
}

// InAsyncTx runs fn in a transaction whose commit does not wait for the
// WAL flush (inAsyncTx): for the dispatch jobs Nudge queues, which the
// sweeper's walk queues again if a crash loses them.
func (s *Store) InAsyncTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.inAsyncTx(ctx, fn)
}

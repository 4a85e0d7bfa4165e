package store

import (
	"context"
	"fmt"
)

// Notify sends payload on a Postgres notification channel; inside a change
// (Change), when the change commits.
func (s *Store) Notify(ctx context.Context, channel, payload string) error {
	if _, err := (ctxDB{s.pool}).Exec(ctx, "SELECT pg_notify($1, $2)", channel, payload); err != nil {
		return fmt.Errorf("notify %s: %w", channel, err)
	}
	return nil
}

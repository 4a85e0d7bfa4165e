package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// ClaimSweep reports whether this process may run the named sweep now: it
// is the first to ask since at least every ago (table sweeps).
func (s *Store) ClaimSweep(ctx context.Context, name string, every time.Duration) (bool, error) {
	tag, err := s.pool.Exec(ctx,
		`UPDATE sweeps SET swept_at = now() WHERE name = $1 AND swept_at <= now() - make_interval(secs => $2::float8)`,
		name, every.Seconds())
	if err != nil {
		return false, fmt.Errorf("claim sweep: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// TakeRetriesDue clears and returns up to limit endpoints whose next retry
// is due: what dispatch runs left on their endpoint as they ended
// (dispatch.StepTx.SetRetryDue). Its cost follows those endpoints alone.
func (s *Store) TakeRetriesDue(ctx context.Context, limit int) ([]uuid.UUID, error) {
	ids, err := s.q.TakeRetriesDue(ctx, int32(limit))
	if err != nil {
		return nil, fmt.Errorf("take retries due: %w", err)
	}
	return ids, nil
}

package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// rescueOneSQL finds one job of the given kinds that River shows as running
// for longer than the grace period although no session holds its lease
// (package lease: every live run holds a session advisory lock keyed by its
// job id), and cancels it, so that a replacement can be inserted in the same
// transaction. The grace covers the moment between River fetching a job and
// its run taking the lease. pg_try_advisory_xact_lock takes the lock only if
// it is free, and holds it until this transaction ends.
//
// It is written by hand because sqlc does not see River's tables (they are
// created by rivermigrate, not by db/migrations). Cancelling a running job
// is what River itself does when it gives up on one; a late completion from
// a run that was not dead after all (JobSetStateIfRunning) then changes
// nothing.
const rescueOneSQL = `
WITH candidates AS MATERIALIZED (
    SELECT id FROM river_job
    WHERE state = 'running' AND kind = ANY($1::text[])
      AND attempted_at < now() - make_interval(secs => $2::float8)
    ORDER BY id
    LIMIT 100
), dead AS (
    -- Only candidates are tried: a lock taken on a live run's key, even for
    -- a moment, would make that run's own Acquire fail.
    SELECT id FROM candidates WHERE pg_try_advisory_xact_lock(id) LIMIT 1
)
UPDATE river_job j SET
    state = 'cancelled',
    finalized_at = now(),
    errors = array_append(j.errors, jsonb_build_object(
        'at', now(), 'attempt', j.attempt,
        'error', 'sluice: the run holding this job died (its lease was free); a new job replaces it')),
    metadata = j.metadata || '{"sluice:rescued": true}'::jsonb
FROM dead
WHERE j.id = dead.id AND j.state = 'running'
RETURNING j.kind, j.args`

// RescueDeadJob replaces one job of the given kinds whose run has died (see
// rescueOneSQL) with a new job of the same kind and arguments, queued by
// jobs.Requeue in the same transaction, so the work is never without a job.
// It reports whether it found one; callers loop, one job per transaction.
func (s *Store) RescueDeadJob(ctx context.Context, kinds []string, grace time.Duration, jobs JobQueue) (bool, error) {
	found := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var (
			kind string
			args []byte
		)
		err := tx.QueryRow(ctx, rescueOneSQL, kinds, grace.Seconds()).Scan(&kind, &args)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("rescue dead job: %w", err)
		}
		found = true
		return jobs.Requeue(ctx, tx, kind, args)
	})
	return found, err
}

package jobs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Replacing a dead run's job is Sluice's own, apart from River's rescuer.
// River's rescuer frees a job stuck `running` only after
// RescueStuckJobsAfter, longer than any run may take. A fan-out, dispatch
// or bulk replay run holds a lease (LeaseHolder) for as long as it lives,
// so a `running` job whose lease is free has no live run: ReplaceDead
// cancels it and queues a new job with the same arguments at once, in one
// transaction, so the work is never without a job.

// candidatesSQL is the jobs of the kinds $1 that River shows as running
// for longer than the grace period of $2 seconds: those whose run may
// have died (replaceSQL, deadSQL).
const candidatesSQL = `
WITH candidates AS MATERIALIZED (
    SELECT id, kind FROM river_job
    WHERE state = 'running' AND kind = ANY($1::text[])
      AND attempted_at < now() - make_interval(secs => $2::float8)
    ORDER BY state, queue, priority, scheduled_at, id
    LIMIT 100
)`

// replaceSQL finds up to $3 jobs of the given kinds that River shows as
// running for longer than the grace period although no session holds
// their lease, and cancels them, so that a replacement can be inserted in
// the same transaction. The grace covers the moment between River
// fetching a job and its run taking the lease. pg_try_advisory_xact_lock
// takes the lock only if it is free, and holds it until this transaction
// ends.
//
// It is written by hand because sqlc does not see River's tables (they are
// created by rivermigrate, not by db/migrations). Cancelling a running job
// is what River itself does when it gives up on one; a late completion from
// a run that was not dead after all (JobSetStateIfRunning) then changes
// nothing.
//
// The candidates are read in the order of River's fetching index (state,
// queue, priority, scheduled_at, id), so the plan is a scan of that index's
// running entries whatever the statistics say. Ordered by id instead, a
// table holding a million finished jobs, analyzed while many ran, was read
// through its primary key from the oldest job on
// (TestReplaceReadsOnlyRunningJobs). The first 100 in that order hold the
// dead: a live run yields within its budget (dispatch.Config.JobTimeout)
// and its successor is a new job, scheduled later, while a dead run's job
// stays where it was, so within seconds it sorts ahead of every live one.
const replaceSQL = candidatesSQL + `, dead AS (
    -- Only candidates are tried: a lock taken on a live run's key, even for
    -- a moment, would make that run's own Acquire fail.
    SELECT id FROM candidates WHERE pg_try_advisory_xact_lock(id) LIMIT $3
)
UPDATE river_job j SET
    state = 'cancelled',
    finalized_at = now(),
    errors = array_append(j.errors, jsonb_build_object(
        'at', now(), 'attempt', j.attempt,
        'error', 'sluice: the run holding this job died (its lease was free); a new job replaces it')),
    metadata = j.metadata || '{"sluice:replaced": true}'::jsonb
FROM dead
WHERE j.id = dead.id AND j.state = 'running'
RETURNING j.kind, j.args`

// deadSQL is replaceSQL's search alone: the kinds of the candidates whose
// lease is free, without a transaction or a change. The locks it tries
// are the statement's own and go with it, as replaceSQL's would with a
// transaction that found nothing.
const deadSQL = candidatesSQL + `
SELECT DISTINCT kind FROM candidates WHERE pg_try_advisory_xact_lock(id)`

// DeadKinds answers which of the given kinds have a job whose run has died
// (see replaceSQL), in one statement on db and no transaction: what a
// sweep asks first, so that a sweep with nothing to replace costs one
// round trip, not a transaction per kind.
func DeadKinds(ctx context.Context, db DBTX, kinds []string, grace time.Duration) ([]string, error) {
	rows, err := db.Query(ctx, deadSQL, kinds, grace.Seconds())
	if err != nil {
		return nil, fmt.Errorf("find dead runs' jobs: %w", err)
	}
	dead, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find dead runs' jobs: %w", err)
	}
	return dead, nil
}

// ReplaceDead replaces, in one transaction on db, up to limit jobs of the
// given kinds whose runs have died (see replaceSQL) with new jobs of the
// same kind and arguments, and returns how many it replaced. Dispatch jobs
// are unique per endpoint, and their insert locks a live job's row:
// replace them one per transaction (limit 1) so that no transaction holds
// many such locks.
func (q *Queue) ReplaceDead(ctx context.Context, db TxBeginner, kinds []string, grace time.Duration, limit int) (int, error) {
	n := 0
	err := pgx.BeginTxFunc(ctx, db, pgx.TxOptions{}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, replaceSQL, kinds, grace.Seconds(), limit)
		if err != nil {
			return fmt.Errorf("find dead runs' jobs: %w", err)
		}
		type dead struct {
			Kind string
			Args []byte
		}
		found, err := pgx.CollectRows(rows, pgx.RowToStructByPos[dead])
		if err != nil {
			return fmt.Errorf("find dead runs' jobs: %w", err)
		}
		for _, d := range found {
			if err := q.requeue(ctx, tx, d.Kind, d.Args); err != nil {
				return err
			}
		}
		n = len(found)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("replace dead runs' %s jobs: %w", strings.Join(kinds, " and "), err)
	}
	return n, nil
}

// Replaced reports whether job id is no longer running. A run asks it once
// it holds its lease: on a database slow to answer (a new leader just
// promoted, every process reconnecting) River may have fetched the job
// longer than the sweeper's grace before the run took the lease, and the
// sweeper, finding the lease free, replaced the job meanwhile
// (ReplaceDead). Such a run must not work: the replacement's run does, and
// two runs of one endpoint would each send what the other claims or is
// handed. A job no longer there (deleted once finalized) is replaced too.
func Replaced(ctx context.Context, db DBTX, id int64) (bool, error) {
	var running bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM river_job WHERE id = $1 AND state = 'running')`, id).Scan(&running)
	if err != nil {
		return false, fmt.Errorf("check job %d still runs: %w", id, err)
	}
	return !running, nil
}

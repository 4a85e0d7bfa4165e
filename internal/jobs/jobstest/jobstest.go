// Package jobstest reads and changes River's job table for tests, so that
// tests outside package jobs need not know River's schema: no test names
// river_job but this package's and package jobs' own.
//
// Reads return []Job, oldest first; Live, InState and Kinds narrow them.
// A test that waits for jobs polls a read in its own wait loop.
package jobstest

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/jobs"
)

// Job is one River job, as far as tests care.
type Job struct {
	ID     int64
	Kind   string
	State  string
	Args   string // JSON
	Errors string // JSON array of its failed attempts' errors, "" when none
	// AttemptedAt is when its last attempt started; nil before the first.
	AttemptedAt *time.Time
}

// Live reports whether River will still run j: it is available, pending,
// scheduled, retryable or running (jobs.LiveStates).
func (j Job) Live() bool { return slices.Contains(jobs.LiveStates, rivertype.JobState(j.State)) }

// selectJobs reads jobs as Job; callers add a WHERE and the order.
const selectJobs = `SELECT id, kind, state::text, args::text, coalesce(errors::text, ''), attempted_at FROM river_job `

// All returns every job, oldest first.
func All(t testing.TB, db jobs.DBTX) []Job {
	t.Helper()
	return query(t, db, selectJobs+`ORDER BY id`)
}

// OfKind returns the jobs of kind, oldest first.
func OfKind(t testing.TB, db jobs.DBTX, kind string) []Job {
	t.Helper()
	return query(t, db, selectJobs+`WHERE kind = $1 ORDER BY id`, kind)
}

// Dispatch returns the dispatch jobs of the endpoint, oldest first.
func Dispatch(t testing.TB, db jobs.DBTX, endpointID string) []Job {
	t.Helper()
	return query(t, db, selectJobs+`WHERE kind = $1 AND args ->> 'endpoint_id' = $2 ORDER BY id`,
		jobs.DispatchArgs{}.Kind(), endpointID)
}

// ArgsOf returns the arguments of every job of A's kind, oldest first.
func ArgsOf[A river.JobArgs](t testing.TB, db jobs.DBTX) []A {
	t.Helper()
	var zero A
	var out []A
	for _, j := range OfKind(t, db, zero.Kind()) {
		var a A
		require.NoError(t, json.Unmarshal([]byte(j.Args), &a), "job %d's args", j.ID)
		out = append(out, a)
	}
	return out
}

// Live returns the jobs of js that River will still run.
func Live(js []Job) []Job {
	return slices.DeleteFunc(slices.Clone(js), func(j Job) bool { return !j.Live() })
}

// InState returns the jobs of js in state.
func InState(js []Job, state string) []Job {
	return slices.DeleteFunc(slices.Clone(js), func(j Job) bool { return j.State != state })
}

// Kinds returns the kinds of the jobs in state, oldest first.
func Kinds(js []Job, state string) []string {
	var out []string
	for _, j := range InState(js, state) {
		out = append(out, j.Kind)
	}
	return out
}

// FetchedBy makes a job look fetched ago by a worker process that has
// since died: running, first attempt, its lease free.
func FetchedBy(t testing.TB, db jobs.DBTX, id int64, ago time.Duration) {
	t.Helper()
	_, err := db.Exec(context.Background(), `UPDATE river_job SET state = 'running', attempt = 1, finalized_at = NULL,
		attempted_at = now() - make_interval(secs => $2), attempted_by = '{dead-client}' WHERE id = $1`, id, ago.Seconds())
	require.NoError(t, err)
}

// Cancel cancels a job as jobs.ReplaceDead leaves a dead run's.
func Cancel(t testing.TB, db jobs.DBTX, id int64) {
	t.Helper()
	_, err := db.Exec(context.Background(), `UPDATE river_job SET state = 'cancelled', finalized_at = now() WHERE id = $1`, id)
	require.NoError(t, err)
}

// DeleteKind deletes every job of kind.
func DeleteKind(t testing.TB, db jobs.DBTX, kind string) {
	t.Helper()
	_, err := db.Exec(context.Background(), `DELETE FROM river_job WHERE kind = $1`, kind)
	require.NoError(t, err)
}

// DeleteAll deletes every job.
func DeleteAll(t testing.TB, db jobs.DBTX) {
	t.Helper()
	_, err := db.Exec(context.Background(), `DELETE FROM river_job`)
	require.NoError(t, err)
}

func query(t testing.TB, db jobs.DBTX, sql string, args ...any) []Job {
	t.Helper()
	rows, err := db.Query(context.Background(), sql, args...)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Job])
	require.NoError(t, err)
	return out
}

// Package jobstest reads and changes River's job table for tests, so that
// tests outside package jobs need not know River's schema.
package jobstest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/jobs"
)

// Job is one River job, as far as tests care.
type Job struct {
	ID    int64
	Kind  string
	State string
	Args  string // JSON
}

// All returns every job, oldest first.
func All(t testing.TB, db jobs.DBTX) []Job {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT id, kind, state::text, args::text FROM river_job ORDER BY id`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Job])
	require.NoError(t, err)
	return out
}

// Kinds returns the kinds of the jobs in state, oldest first.
func Kinds(js []Job, state string) []string {
	var out []string
	for _, j := range js {
		if j.State == state {
			out = append(out, j.Kind)
		}
	}
	return out
}

// FetchedBy makes a job look fetched ago by a worker process that has
// since died: running, first attempt, its lease free.
func FetchedBy(t testing.TB, db jobs.DBTX, id int64, ago time.Duration) {
	t.Helper()
	_, err := db.Exec(context.Background(), `UPDATE river_job SET state = 'running', attempt = 1,
		attempted_at = now() - make_interval(secs => $2), attempted_by = '{dead-client}' WHERE id = $1`, id, ago.Seconds())
	require.NoError(t, err)
}

// DeleteKind deletes every job of kind.
func DeleteKind(t testing.TB, db jobs.DBTX, kind string) {
	t.Helper()
	_, err := db.Exec(context.Background(), `DELETE FROM river_job WHERE kind = $1`, kind)
	require.NoError(t, err)
}

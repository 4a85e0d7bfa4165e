package jobs

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river/rivertype"
)

// LiveStates are the River job states in which a job will still run: a
// job in one of them is queued, parked or running. A dispatch job is
// unique per endpoint across these states (DispatchArgs.InsertOpts), every
// statement that asks whether an endpoint or an event has a live job
// reads them, and the index of live dispatch jobs
// (00015_live_dispatch_jobs_index.sql) has them as its predicate, in this
// order, so that Postgres sees the statements' condition as the index's.
var LiveStates = []rivertype.JobState{
	rivertype.JobStateAvailable,
	rivertype.JobStatePending,
	rivertype.JobStateRunning,
	rivertype.JobStateScheduled,
	rivertype.JobStateRetryable,
}

// LiveStatesSQL is LiveStates as an SQL list, for "state IN " +
// LiveStatesSQL: ('available', 'pending', 'running', 'scheduled',
// 'retryable').
var LiveStatesSQL = func() string {
	quoted := make([]string, len(LiveStates))
	for i, s := range LiveStates {
		quoted[i] = "'" + string(s) + "'"
	}
	return "(" + strings.Join(quoted, ", ") + ")"
}()

// DBTX is what the statements on River's tables run on: a pool, a
// connection or a transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// TxBeginner is what a statement that needs a transaction of its own runs
// on: a pool or a connection.
type TxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// liveDispatchSQL finds which endpoints have a live dispatch job, from the
// index of live dispatch jobs (00015_live_dispatch_jobs_index.sql, whose
// predicate this repeats).
var liveDispatchSQL = `
SELECT DISTINCT (j.args ->> 'endpoint_id')::uuid FROM river_job j
WHERE j.kind = 'dispatch'
  AND j.state IN ` + LiveStatesSQL + `
  AND j.args ->> 'endpoint_id' = ANY($1::text[])`

// LiveDispatch reports which of the endpoints have a live dispatch job:
// what River's unique insert of their dispatch job would find.
func LiveDispatch(ctx context.Context, db DBTX, endpointIDs []uuid.UUID) (map[uuid.UUID]bool, error) {
	rows, err := db.Query(ctx, liveDispatchSQL, uuidStrings(endpointIDs))
	if err != nil {
		return nil, fmt.Errorf("look up live dispatch jobs: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("look up live dispatch jobs: %w", err)
	}
	live := make(map[uuid.UUID]bool, len(ids))
	for _, id := range ids {
		live[id] = true
	}
	return live, nil
}

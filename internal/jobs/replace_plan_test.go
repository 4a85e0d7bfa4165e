package jobs_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestReplaceReadsOnlyRunningJobs gives river_job 20,000 finished jobs and
// the statistics of a moment when a quarter of them ran (as a drain of many
// endpoints leaves them until autovacuum analyzes again), then runs the
// sweeper's search for dead runs' jobs with its generic plan. It must read
// River's fetching index at its running entries, a few buffers; a plan
// ordered by id walked the primary key through every finished job.
func TestReplaceReadsOnlyRunningJobs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := storetest.New(t)
	for _, sql := range []string{
		`ALTER TABLE river_job SET (autovacuum_enabled = false)`,
		`INSERT INTO river_job (kind, args, state, queue, max_attempts, attempt, attempted_at, finalized_at)
		 SELECT 'dispatch', '{}', CASE WHEN g % 4 = 0 THEN 'running' ELSE 'completed' END::river_job_state,
		        'default', 25, 1, now() - interval '1 hour',
		        CASE WHEN g % 4 = 0 THEN NULL ELSE now() END
		 FROM generate_series(1, 20000) g`,
		`ANALYZE river_job`,
		`UPDATE river_job SET state = 'completed', finalized_at = now() WHERE state = 'running'`,
		// Live runs, taken a moment ago: within the grace, so none is touched.
		`INSERT INTO river_job (kind, args, state, queue, max_attempts, attempt, attempted_at)
		 SELECT 'dispatch', '{}', 'running', 'default', 25, 1, now() FROM generate_series(1, 5)`,
		`VACUUM river_job`, // clears the dead index entries, keeps the statistics
	} {
		_, err := f.Store.Pool().Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	plan := storetest.ExplainGeneric(t, f.Store.Pool(), jobs.ReplaceSQL, `'{dispatch}', 3, 1`)
	t.Logf("replace:\n%s", plan)
	require.Contains(t, plan, "Index Scan using river_job_prioritized_fetching_index")
	require.Less(t, storetest.SharedHits(t, plan), 50, "buffers read to find no dead run among 20,000 finished jobs")
}

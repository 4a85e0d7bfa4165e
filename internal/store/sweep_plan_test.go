package store_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/store"
)

// TestSweepProbesOnlyLiveDispatchJobs: an endpoint with deliveries due and
// 5,000 finished dispatch jobs behind it (a busy day's history, which River
// keeps until its cleaner runs) costs the sweeper a probe of the index of
// live dispatch jobs for that endpoint, not a read of its history.
func TestSweepProbesOnlyLiveDispatchJobs(t *testing.T) {
	t.Parallel()
	f, ep := dueBacklog(t, 1)
	ctx := t.Context()
	_, err := f.Store.Pool().Exec(ctx, `
		INSERT INTO river_job (args, kind, max_attempts, queue, state, finalized_at)
		SELECT jsonb_build_object('endpoint_id', $1::uuid), 'dispatch', 25, 'dispatch', 'completed', now()
		FROM generate_series(1, 5000)`, ep)
	require.NoError(t, err)
	_, err = f.Store.Pool().Exec(ctx, `ANALYZE river_job`)
	require.NoError(t, err)

	plan := explainAnalyze(t, f.Store, store.EndpointsNeedingDispatchSQL, 100)
	t.Logf("sweep over an endpoint with 5,000 finished dispatch jobs:\n%s", plan)
	require.Regexp(t, `Index Scan using sluice_river_job_live_dispatch_idx on river_job j .*\(actual .* loops=1\)\n\s+Index Cond: \(\(args ->> 'endpoint_id'::text\) = \(e.id\)::text\)`, plan,
		"the sweep probes the live dispatch jobs' index for the endpoint")
	require.False(t, strings.Contains(plan, "river_job_args_index"), "nor River's index of every job's arguments")

	ids, err := f.Store.EndpointsNeedingDispatch(ctx, 100)
	require.NoError(t, err)
	require.Contains(t, ids, ep, "finished jobs do not count as live")
}

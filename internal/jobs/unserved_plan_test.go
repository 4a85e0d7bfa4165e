package jobs_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestWalkProbesOnlyLiveDispatchJobs: an endpoint with 100,000 deliveries
// due and 5,000 finished dispatch jobs behind it (a busy day's history,
// which River keeps until its cleaner runs), among 60 idle ones, costs the
// sweeper's walk a probe of its due queue and one of the index of live
// dispatch jobs, not a read of its backlog or its history; the idle
// endpoints cost nothing.
func TestWalkProbesOnlyLiveDispatchJobs(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ep := newEndpoint(t, f, "h")
	storetest.DueBacklog(t, f.Store.Pool(), f.TenantA.ID, ep, 100000)
	ctx := t.Context()
	_, err := f.Store.Pool().Exec(ctx, `
		INSERT INTO river_job (args, kind, max_attempts, queue, state, finalized_at)
		SELECT jsonb_build_object('endpoint_id', $1::uuid), 'dispatch', 25, 'dispatch', 'completed', now()
		FROM generate_series(1, 5000)`, ep)
	require.NoError(t, err)
	for i := range 60 { // endpoints with nothing queued, as most are
		newEndpoint(t, f, fmt.Sprint(i))
	}
	// With statistics that show the backlog, Postgres would rather read all
	// of it once than probe each endpoint, were the probes not fenced.
	_, err = f.Store.Pool().Exec(ctx, `ANALYZE river_job, endpoints, deliveries, events`)
	require.NoError(t, err)

	plan := storetest.ExplainAnalyze(t, f.Store.Pool(), jobs.EndpointsNeedingDispatchSQL, 100, uuid.Nil)
	t.Logf("walk over an endpoint with 5,000 finished dispatch jobs:\n%s", plan)
	require.Regexp(t, `Index Scan using sluice_river_job_live_dispatch_idx on river_job j .*\(actual .* loops=1\)\n\s+Index Cond: \(\(args ->> 'endpoint_id'::text\) = \(e.id\)::text\)`, plan,
		"the walk probes the live dispatch jobs' index for the endpoint")
	require.False(t, strings.Contains(plan, "river_job_args_index"), "nor River's index of every job's arguments")
	require.Regexp(t, `Index Only Scan using deliveries_\d{8}_endpoint_id_next_attempt_at_id_idx on deliveries_\d{8} d_\d+ .*\(actual [^)]* rows=[01] loops=\d+\)\n\s+Index Cond: \(\(endpoint_id = e.id\)`, plan,
		"each endpoint's due queue is probed for one row, not read")
	require.NotRegexp(t, `Seq Scan on deliveries`, plan, "no partition of deliveries is read whole")
	require.NotContains(t, plan, "loops=61", "the idle endpoints are not probed at all")

	w, err := jobs.EndpointsNeedingDispatch(ctx, f.Store.Pool(), 100, uuid.Nil)
	require.NoError(t, err)
	require.Contains(t, w.Due, ep, "finished jobs do not count as live")
}

// TestLiveDispatchProbesOnlyLiveDispatchJobs: looking up which endpoints
// have a live dispatch job reads the index of live dispatch jobs, whose
// predicate the statement repeats, not River's index of every job's
// arguments.
func TestLiveDispatchProbesOnlyLiveDispatchJobs(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ep := newEndpoint(t, f, "h")
	ctx := t.Context()
	_, err := f.Store.Pool().Exec(ctx, `
		INSERT INTO river_job (args, kind, max_attempts, queue, state, finalized_at)
		SELECT jsonb_build_object('endpoint_id', $1::uuid), 'dispatch', 25, 'dispatch', 'completed', now()
		FROM generate_series(1, 5000)`, ep)
	require.NoError(t, err)
	_, err = f.Store.Pool().Exec(ctx, `ANALYZE river_job`)
	require.NoError(t, err)

	plan := storetest.ExplainAnalyze(t, f.Store.Pool(), jobs.LiveDispatchSQL, []string{ep.String()})
	t.Logf("live dispatch lookup:\n%s", plan)
	require.Contains(t, plan, "sluice_river_job_live_dispatch_idx")
	require.NotContains(t, plan, "river_job_args_index")
}

// newEndpoint creates an endpoint of tenant A at https://example.com/path
// (max_in_flight 10) and returns its id.
func newEndpoint(t testing.TB, f storetest.Fixture, path string) uuid.UUID {
	t.Helper()
	ep, err := f.Store.CreateEndpoint(t.Context(), f.TenantA.ID, sluice.EndpointSettings{URL: "https://example.com/" + path, MaxInFlight: 10}, storetest.Secret)
	require.NoError(t, err)
	return ep.ID
}

package replay_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/jobs/jobstest"
	"github.com/sluice-dev/sluice/internal/replay"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// staged makes an endpoint with n dead deliveries, bulk-replays them, and
// returns the fixture and the replay job's arguments as queued.
func staged(t *testing.T, n int) (storetest.Fixture, jobs.ReplayArgs) {
	t.Helper()
	f := storetest.New(t)
	ep, err := f.Store.CreateEndpoint(t.Context(), f.TenantA.ID, sluice.EndpointSettings{URL: "http://127.0.0.1:9/hook", MaxInFlight: 10}, storetest.Secret)
	require.NoError(t, err)
	storetest.DeadBacklog(t, f.Store, f.TenantA.ID, ep.ID, n)
	queued, err := replay.Endpoint(t.Context(), f.Store, f.TenantA.ID, ep.ID, sluice.ReplayFilter{Status: sluice.DeliveryDead}, f.Jobs)
	require.NoError(t, err)
	require.EqualValues(t, n, queued)
	queuedArgs := jobstest.ArgsOf[jobs.ReplayArgs](t, f.Store.Pool())
	require.Len(t, queuedArgs, 1)
	args := queuedArgs[0]
	require.Equal(t, ep.ID, args.EndpointID)
	return f, args
}

// counts is how many replays of the endpoint's deliveries exist, from how
// many distinct sources, and how many replay requests are left.
func counts(t *testing.T, f storetest.Fixture, endpointID uuid.UUID) (replays, sources, requests int) {
	t.Helper()
	const q = `
SELECT count(*), count(DISTINCT replayed_from), (SELECT count(*) FROM replay_requests)
FROM deliveries WHERE endpoint_id = $1 AND replayed_from IS NOT NULL`
	require.NoError(t, f.Store.Pool().QueryRow(context.Background(), q, endpointID).Scan(&replays, &sources, &requests))
	return replays, sources, requests
}

// TestRunIsIdempotent: a run cut short after a chunk, then two runs at
// once, then one more, still replay each staged delivery exactly once.
func TestRunIsIdempotent(t *testing.T) {
	t.Parallel()
	const n = 12_345
	f, args := staged(t, n)

	finished, err := replay.Staged(t.Context(), f.Store, args.RequestID, args.EndpointID, 2000, f.Jobs)
	require.NoError(t, err)
	require.False(t, finished)
	replays, sources, requests := counts(t, f, args.EndpointID)
	require.Equal(t, [3]int{1000 + 2000, 1000 + 2000, 1}, [3]int{replays, sources, requests})

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { errs[i] = replay.Run(t.Context(), f.Store, args, f.Jobs) })
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.NoError(t, replay.Run(t.Context(), f.Store, args, f.Jobs))
	replays, sources, requests = counts(t, f, args.EndpointID)
	require.Equal(t, [3]int{n, n, 0}, [3]int{replays, sources, requests})
}

// TestRunAfterEndpointDeleted: deleting the endpoint deletes its staged
// replay request, and the job then finishes with nothing to do.
func TestRunAfterEndpointDeleted(t *testing.T) {
	t.Parallel()
	f, args := staged(t, 3000)
	require.NoError(t, store.ExecRows(t.Context(), f.Store, (*dbq.Queries).DeleteEndpoint, dbq.DeleteEndpointParams{TenantID: f.TenantA.ID, ID: args.EndpointID}))
	_, _, requests := counts(t, f, args.EndpointID)
	require.Zero(t, requests)
	require.NoError(t, replay.Run(t.Context(), f.Store, args, f.Jobs))
	finished, err := replay.Staged(t.Context(), f.Store, args.RequestID, args.EndpointID, 10, f.Jobs)
	require.NoError(t, err)
	require.True(t, finished)
}

package dispatch_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/jobs/jobstest"
	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestRunOfAReplacedJobDoesNothing: a run that takes its lease after the
// sweeper replaced its job (cancelled, as jobs.ReplaceDead leaves it) ends
// without sending, so the endpoint never has two runs. jobs.Replaced tells
// a job still running from one cancelled or gone.
func TestRunOfAReplacedJobDoesNothing(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx := t.Context()
	recv := receiver.New(t)
	ep, err := f.Store.CreateEndpoint(ctx, f.TenantA.ID, sluice.EndpointSettings{URL: recv.URL(), MaxInFlight: 10}, storetest.Secret)
	require.NoError(t, err)
	_, err = f.Store.CreateSubscription(ctx, f.TenantA.ID, ep.ID, []string{"order.paid"}, nil)
	require.NoError(t, err)
	stored, _, err := fanout.InsertOne(ctx, f.Store, f.TenantA.ID, sluice.NewEvent{Type: "order.paid", Payload: []byte(`{}`)}, f.Jobs)
	require.NoError(t, err)
	_, _, err = fanout.Events(ctx, f.Store, []uuid.UUID{stored.ID}, nil)
	require.NoError(t, err)

	pool := f.Store.Pool()
	jobstest.DeleteAll(t, pool)
	require.NoError(t, f.Jobs.DispatchNow(ctx, []uuid.UUID{ep.ID}))
	all := jobstest.All(t, pool)
	require.Len(t, all, 1)
	id := all[0].ID
	jobstest.FetchedBy(t, pool, id, 10*time.Second)

	leases, err := jobs.NewLeaseHolder(jobs.LeaseConfig{ConnConfig: pool.Config().ConnConfig})
	require.NoError(t, err)
	require.NoError(t, leases.Start(ctx))
	t.Cleanup(leases.Stop)
	w, err := dispatch.NewWorker(f.Store, dispatch.Config{
		Sender: send.New(send.Config{AllowPrivate: true}), DeliveryTimeout: 5 * time.Second, Budget: 100 * time.Millisecond,
		Nudger: dispatch.NewNudger(f.Store, f.Jobs, dispatch.NudgerConfig{}), Leases: leases,
	})
	require.NoError(t, err)
	t.Cleanup(w.Close)
	job := &river.Job[jobs.DispatchArgs]{JobRow: &rivertype.JobRow{ID: id, Attempt: 1, State: rivertype.JobStateRunning}, Args: jobs.DispatchArgs{EndpointID: ep.ID}}

	jobstest.Cancel(t, pool, id)
	require.NoError(t, w.Work(ctx, job))
	require.Zero(t, recv.Count(), "the replaced job's run sent nothing")

	replaced, err := jobs.Replaced(ctx, pool, id)
	require.NoError(t, err)
	require.True(t, replaced)

	jobstest.FetchedBy(t, pool, id, time.Second)
	replaced, err = jobs.Replaced(ctx, pool, id)
	require.NoError(t, err)
	require.False(t, replaced, "a job still running is its run's to work")

	jobstest.DeleteAll(t, pool)
	replaced, err = jobs.Replaced(ctx, pool, id)
	require.NoError(t, err)
	require.True(t, replaced, "a job gone is no run's")
}

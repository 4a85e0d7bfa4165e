package ingest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/ingest"
	"github.com/sluice-dev/sluice/internal/jobs/jobstest"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestSubmitMakesDeliveriesInItsCommit checks that a post, single or
// batch, answers with its deliveries already committed and no fan-out job,
// except for the events that need one: those with a coalesce key. After the
// commit the endpoint gets a dispatch job (no run lingers here), and a
// second post to it finds that job live and queues no other.
func TestSubmitMakesDeliveriesInItsCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := storetest.New(t)
	ep := subscribedEndpoint(t, f, "a", "order.*")
	other := subscribedEndpoint(t, f, "b", "invoice.*")

	b := start(t, f, ingest.Config{})
	ev, err := b.Submit(ctx, f.TenantA.ID, sluice.NewEvent{Type: "order.paid", Payload: []byte(`{}`)})
	require.NoError(t, err)
	require.Equal(t, 1, deliveriesOf(t, f, ev.ID), "the delivery committed with the event")
	require.Zero(t, jobsOf(t, f, "fanout"), "no fan-out job")
	require.Eventually(t, func() bool { return dispatchJobs(t, f, ep) == 1 }, 10*time.Second, 10*time.Millisecond,
		"the endpoint's dispatch job is queued after the commit")
	require.Zero(t, dispatchJobs(t, f, other), "an endpoint the event does not reach gets none")

	batch, err := b.SubmitBatch(ctx, f.TenantA.ID, []sluice.NewEvent{
		{Type: "order.shipped", Payload: []byte(`{}`)}, {Type: "invoice.paid", Payload: []byte(`{}`)},
	})
	require.NoError(t, err)
	require.Equal(t, 1, deliveriesOf(t, f, batch[0].ID), "a batch's deliveries commit with it too")
	require.Equal(t, 1, deliveriesOf(t, f, batch[1].ID))
	b.Stop() // the last nudge is done
	require.Equal(t, 1, dispatchJobs(t, f, ep), "the live job is found, not duplicated")
	require.Equal(t, 1, dispatchJobs(t, f, other), "the batch's other endpoint has its job")

	keyed := start(t, f, ingest.Config{})
	ev, err = keyed.Submit(ctx, f.TenantA.ID, sluice.NewEvent{Type: "order.paid", Payload: []byte(`{}`), CoalesceKey: new("o1")})
	require.NoError(t, err)
	require.Zero(t, deliveriesOf(t, f, ev.ID), "a coalesced event is fanned out by its job")
	require.Equal(t, 1, jobsOf(t, f, "fanout"))
}

// start returns an Ingester on f's store, started, and stopped when the
// test ends.
func start(t *testing.T, f storetest.Fixture, cfg ingest.Config) *ingest.Ingester {
	t.Helper()
	if cfg.Nudger == nil {
		cfg.Nudger = dispatch.NewNudger(f.Store, f.Jobs, dispatch.NudgerConfig{})
	}
	in, err := ingest.New(f.Store, cfg)
	require.NoError(t, err)
	require.NoError(t, in.Start(context.Background()))
	t.Cleanup(in.Stop)
	return in
}

func subscribedEndpoint(t *testing.T, f storetest.Fixture, path, pattern string) uuid.UUID {
	t.Helper()
	ep, err := f.Store.CreateEndpoint(t.Context(), f.TenantA.ID, sluice.EndpointSettings{URL: "https://example.com/" + path, MaxInFlight: 10}, storetest.Secret)
	require.NoError(t, err)
	_, err = f.Store.CreateSubscription(t.Context(), f.TenantA.ID, ep.ID, []string{pattern}, nil)
	require.NoError(t, err)
	return ep.ID
}

func deliveriesOf(t *testing.T, f storetest.Fixture, eventID uuid.UUID) int {
	t.Helper()
	var n int
	require.NoError(t, f.Store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM deliveries WHERE event_id = $1`, eventID).Scan(&n))
	return n
}

func jobsOf(t *testing.T, f storetest.Fixture, kind string) int {
	t.Helper()
	return len(jobstest.OfKind(t, f.Store.Pool(), kind))
}

func dispatchJobs(t *testing.T, f storetest.Fixture, endpointID uuid.UUID) int {
	t.Helper()
	return len(jobstest.Dispatch(t, f.Store.Pool(), endpointID.String()))
}

// TestDeletedEndpointsDoNotFailPosts deletes endpoints while events for
// them are posted. A post's deliveries go only to endpoints that exist when
// it commits: none may fail for an endpoint deleted meanwhile (a foreign key
// violation would split its group and refuse it as bad input).
func TestDeletedEndpointsDoNotFailPosts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := storetest.New(t)
	const endpoints = 40
	eps := make([]uuid.UUID, endpoints)
	for i := range eps {
		eps[i] = subscribedEndpoint(t, f, fmt.Sprint(i), "*")
	}
	b := start(t, f, ingest.Config{})

	stop := make(chan struct{})
	committed := make(chan struct{}, 1) // a post committed since the last drain
	var posters sync.WaitGroup
	posted, failed := make([]int, 8), make([]error, 8)
	for p := range posted {
		posters.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := b.Submit(ctx, f.TenantA.ID, sluice.NewEvent{Type: "t.x", Payload: []byte(`{}`)}); err != nil {
					failed[p] = err
					return
				}
				posted[p]++
				select {
				case committed <- struct{}{}:
				default:
				}
			}
		})
	}
	// Each deletion waits for a post to commit after the one before, so
	// that posts land between every two deletions.
	for _, ep := range eps {
		select {
		case <-committed:
		default:
		}
		select {
		case <-committed:
		case <-time.After(10 * time.Second):
			require.FailNow(t, "no post committed")
		}
		require.NoError(t, store.ExecRows(ctx, f.Store, (*dbq.Queries).DeleteEndpoint, dbq.DeleteEndpointParams{TenantID: f.TenantA.ID, ID: ep}))
	}
	close(stop)
	posters.Wait()
	total := 0
	for p, n := range posted {
		require.NoError(t, failed[p])
		total += n
	}
	t.Logf("%d events posted while %d endpoints were deleted", total, endpoints)
}

package dispatch_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/jobs/jobstest"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
	"github.com/sluice-dev/sluice/internal/testkit/stmtcount"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestPlainDispatchStatements holds a dispatch run to a healthy endpoint
// of a tenant that uses no feature (no rate limit, FIFO, adaptive rate,
// poll delivery or tracing) to the statements it takes: 100 due
// deliveries, max_in_flight 10, nudged once, run by a real worker under
// River, are ten claims and ten records (each one statement, its settings
// carried by its connection), the locked first claim, the last claim that finds nothing,
// and the finish. River's own statements on its own pool (fetching the
// job) are not counted; what it runs in the run's transactions is. A
// feature that adds a statement per delivery, or per batch, fails here.
func TestPlainDispatchStatements(t *testing.T) {
	t.Parallel()
	const deliveries = 100
	counts := countPlainRun(t, receiver.New(t), deliveries)
	t.Logf("%d deliveries, %d statements (%.2f a delivery):\n%s", deliveries, counts.Total(),
		float64(counts.Total())/deliveries, counts)
	// 5 for the nudge (the live-job lookup, the job's insert in its own
	// transaction: BEGIN with its setting, the insert, the notification,
	// COMMIT), 5 for the locked first claim (BEGIN, the endpoint's lock, its
	// poll stamp, the claim, COMMIT), 1 for each of the ten records and
	// ten more claims, 5 for the finish (BEGIN, the endpoint's lock, the
	// final check, the job's completion, COMMIT).
	require.LessOrEqual(t, counts.Total(), plainDispatchStatements,
		"statements for %d deliveries to a plain endpoint:\n%s", deliveries, counts)
}

// plainDispatchStatements is what TestPlainDispatchStatements's run takes
// (35), with room for three readings of the endpoint (one statement each,
// TestStaleEndpointReadWithoutLock) that a run slower than refreshTarget
// makes on a loaded machine, and the claim read early (earlyClaim) that
// the run then drops. A statement added per delivery adds a hundred.
const plainDispatchStatements = 35 + 3 + 1

// TestStaleEndpointReadWithoutLock: a run to a plain endpoint that lasts
// past refreshTarget (ten batches of 10 to a receiver answering in 150
// ms) reads the endpoint again with one plain statement, not under its
// lock in a transaction of a locked claim: the endpoint is locked once,
// by the run's first claim.
func TestStaleEndpointReadWithoutLock(t *testing.T) {
	t.Parallel()
	recv := receiver.New(t)
	recv.Answer(receiver.Behavior{Delay: 150 * time.Millisecond})
	counts := countPlainRun(t, recv, 100)
	t.Logf("100 deliveries:\n%s", counts)
	require.Equal(t, 1, counts["LockEndpointForDispatch"], "the endpoint is locked by the first claim alone")
	require.Positive(t, counts["ReadEndpointForDispatch"], "the run read the endpoint again")
}

// countPlainRun posts n events to a plain endpoint on recv and counts the
// statements of the run that sends them, from its nudge to its end (River's
// own on its pool aside), each of them sent once.
func countPlainRun(t *testing.T, recv *receiver.Receiver, n int) stmtcount.Counts {
	t.Helper()
	f := stmtcount.New(t)
	ep := plainEndpoint(t, f, recv)
	postPlain(t, f, n)
	nudger := startWorker(t, f.Store, f.RiverPool, 2, 10*time.Second)

	f.Counter.Start()
	require.NoError(t, nudger.Nudge(t.Context(), []uuid.UUID{ep.ID}))
	require.True(t, recv.Await(30*time.Second, func(reqs []receiver.Request) bool { return len(reqs) >= n }))
	require.Eventually(t, func() bool { return dispatchDone(t, f, ep.ID) }, 30*time.Second, 20*time.Millisecond,
		"the run finishes")
	counts := f.Counter.Stop()
	require.Equal(t, n, recv.Count(), "each sent once")
	return counts
}

// dispatchDone reports whether the endpoint has no delivery queued and no
// dispatch job live.
func dispatchDone(t *testing.T, f stmtcount.Fixture, endpointID uuid.UUID) bool {
	t.Helper()
	var queued int
	err := f.RiverPool.QueryRow(t.Context(),
		`SELECT count(*) FROM deliveries WHERE endpoint_id = $1 AND status IN ('pending', 'failed')`, endpointID).Scan(&queued)
	require.NoError(t, err)
	return queued == 0 && len(jobstest.Live(jobstest.OfKind(t, f.RiverPool, "dispatch"))) == 0
}

// TestPlainDispatchAllocations holds what a plain endpoint's delivery
// allocates in this process (claiming, building and signing the body,
// sending it, recording what came back, and the loopback receiver's side
// of the request) to what it is: a feature that adds work per delivery on
// the dispatch path fails here. The runs' fixed cost (the job, the first
// claim, the finish) is left out by comparing a run of 100 deliveries
// with one of 300. Not parallel: it counts the whole process's
// allocations, which River's own timers add a little to.
func TestPlainDispatchAllocations(t *testing.T) { //nolint:paralleltest // counts the process's allocations
	ctx := context.Background()
	f := stmtcount.New(t)
	recv := receiver.New(t)
	ep := plainEndpoint(t, f, recv)
	nudger := startWorker(t, f.Store, f.RiverPool, 2, 10*time.Second)

	allocs := func(deliveries int) uint64 {
		postPlain(t, f, deliveries)
		want := recv.Count() + deliveries
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		require.NoError(t, nudger.Nudge(ctx, []uuid.UUID{ep.ID}))
		require.True(t, recv.Await(30*time.Second, func(reqs []receiver.Request) bool { return len(reqs) >= want }))
		require.Eventually(t, func() bool { return dispatchDone(t, f, ep.ID) }, 30*time.Second, 20*time.Millisecond,
			"the run finishes")
		runtime.ReadMemStats(&after)
		return after.Mallocs - before.Mallocs
	}
	few, many := allocs(100), allocs(300)
	perDelivery := float64(many-few) / 200
	t.Logf("allocations: %d for a run of 100 deliveries, %d for 300: %.1f a delivery", few, many, perDelivery)
	require.LessOrEqual(t, perDelivery, plainDispatchAllocsPerDelivery+raceAllocs, "allocations per delivery to a plain endpoint")
}

// plainDispatchAllocsPerDelivery is TestPlainDispatchAllocations's reading
// (144; 153 under the race detector) with room for a loaded machine's
// longer runs (River's timers) and a dependency's change; a feature's work
// per delivery (a statement's worth, or a span's) takes more than that
// room.
const plainDispatchAllocsPerDelivery = 157.0

// plainEndpoint is an endpoint of tenant A with no feature (max_in_flight
// 10) on recv, subscribed to order.paid.
func plainEndpoint(t *testing.T, f stmtcount.Fixture, recv *receiver.Receiver) sluice.Endpoint {
	t.Helper()
	ep, err := f.Store.CreateEndpoint(t.Context(), f.TenantA.ID, sluice.EndpointSettings{URL: recv.URL(), MaxInFlight: 10}, storetest.Secret)
	require.NoError(t, err)
	_, err = f.Store.CreateSubscription(t.Context(), f.TenantA.ID, ep.ID, []string{"order.paid"}, nil)
	require.NoError(t, err)
	return ep
}

// postPlain posts n order.paid events of tenant A, in groups of 20.
func postPlain(t *testing.T, f stmtcount.Fixture, n int) {
	t.Helper()
	for range n / 20 {
		evs := make([]fanout.TenantEvent, 20)
		for i := range evs {
			evs[i] = fanout.TenantEvent{TenantID: f.TenantA.ID, Event: sluice.NewEvent{Type: "order.paid", Payload: []byte(`{"n":1}`)}}
		}
		_, _, err := fanout.Insert(t.Context(), f.Store, evs, f.Jobs)
		require.NoError(t, err)
	}
}

var _ pgx.Tx // River's transaction type, as the client is typed

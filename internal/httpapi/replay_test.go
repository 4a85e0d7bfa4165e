package httpapi_test

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/jobs/jobstest"
	"github.com/sluice-dev/sluice/internal/replay"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/dispatchtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// settle sends every due delivery of the endpoint, as a dispatcher would,
// with this outcome (next is a failed one's next attempt), and returns how
// many it settled.
func (b *testBundle) settle(endpointID uuid.UUID, status string, next time.Time) int {
	t := b.t
	t.Helper()
	code := map[string]int{sluice.DeliveryDelivered: 200}[status]
	if code == 0 {
		code = 500
	}
	return dispatchtest.Settle(t, b.store, endpointID, func(c dispatch.Claimed) dispatch.Outcome {
		return dispatch.Outcome{
			DeliveryID: c.ID, EventID: c.EventID, Status: status, Failed: status != sluice.DeliveryDelivered,
			NextAttemptAt: next, At: time.Now(), StatusCode: code, LatencyMS: 1,
		}
	})
}

// deadBacklog makes an endpoint with n events whose deliveries are dead.
func (b *testBundle) deadBacklog(n int) (string, uuid.UUID) {
	t := b.t
	ep := b.createEndpoint(b.keyA, map[string]any{"url": "http://127.0.0.1:9/hook"})["id"].(string)
	r := b.do(b.keyA, http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": ep, "event_types": []string{"*"}})
	require.Equal(t, http.StatusCreated, r.Status)
	var ids []uuid.UUID
	for range n {
		ev := b.do(b.keyA, http.MethodPost, "/v1/events", map[string]any{"type": "a", "payload": map[string]any{}}).JSON(t)["id"].(string)
		ids = append(ids, uuid.MustParse(ev))
	}
	_, _, err := fanout.Events(t.Context(), b.store, ids, nil)
	require.NoError(t, err)
	id := uuid.MustParse(ep)
	require.Equal(t, n, b.settle(id, sluice.DeliveryDead, time.Now()))
	return ep, id
}

func (b *testBundle) bulkReplay(ep string, body any) int {
	b.t.Helper()
	r := b.do(b.keyA, http.MethodPost, "/v1/endpoints/"+ep+"/replay", body)
	require.Equal(b.t, http.StatusAccepted, r.Status, string(r.Body))
	return int(r.JSON(b.t)["queued"].(float64))
}

func (b *testBundle) deliveries(query string) []any {
	b.t.Helper()
	return b.do(b.keyA, http.MethodGet, "/v1/deliveries?limit=500&"+query, nil).JSON(b.t)["data"].([]any)
}

// TestBulkReplayCannotMultiply: five identical calls queue each dead event
// once; once those are settled, another call replays each event exactly
// once again (the newest delivery, never also the ones before it).
func TestBulkReplayCannotMultiply(t *testing.T) {
	b := setup(t)
	const events = 7
	ep, id := b.deadBacklog(events)
	dead := map[string]any{"status": "dead"}

	require.Equal(t, events, b.bulkReplay(ep, dead))
	for range 4 {
		require.Zero(t, b.bulkReplay(ep, dead), "the first call's replays are still queued")
	}
	require.Len(t, b.deliveries("endpoint_id="+ep), 2*events)
	pending := b.deliveries("status=pending&endpoint_id=" + ep)
	require.Len(t, pending, events)

	// One by one, too: the event already has a replay queued, and a queued
	// delivery is never replayed (retry it instead).
	original := b.deliveries("status=dead&endpoint_id=" + ep)[0].(map[string]any)["id"].(string)
	p := requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/deliveries/"+original+"/replay", nil), http.StatusConflict)
	require.Contains(t, p["detail"], "already queued")
	replay := pending[0].(map[string]any)["id"].(string)
	p = requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/deliveries/"+replay+"/replay", nil), http.StatusConflict)
	require.Contains(t, p["detail"], "retry")

	// The replays die too: the next call replays each event once more,
	// from its newest delivery only.
	require.Equal(t, events, b.settle(id, sluice.DeliveryDead, time.Now()))
	require.Equal(t, events, b.bulkReplay(ep, dead))
	require.Zero(t, b.bulkReplay(ep, dead))
	require.Len(t, b.deliveries("endpoint_id="+ep), 3*events)

	// Delivered at last: nothing dead is newest any more; replaying the
	// delivered ones queues each event once.
	require.Equal(t, events, b.settle(id, sluice.DeliveryDelivered, time.Now()))
	require.Zero(t, b.bulkReplay(ep, dead))
	require.Zero(t, b.bulkReplay(ep, map[string]any{"status": "delivered", "until": time.Now().Add(-time.Hour).Format(time.RFC3339)}))
	require.Equal(t, events, b.bulkReplay(ep, map[string]any{"status": "delivered", "since": time.Now().Add(-time.Hour).Format(time.RFC3339)}))
	require.Zero(t, b.bulkReplay(ep, map[string]any{"status": "delivered"}))
	require.Len(t, b.deliveries("endpoint_id="+ep), 4*events)
	for _, d := range b.deliveries("status=pending&endpoint_id=" + ep) {
		require.NotNil(t, d.(map[string]any)["replayed_from"])
	}
}

// TestConcurrentBulkReplaysTakeTurns: identical calls at once still queue
// each event once between them.
func TestConcurrentBulkReplaysTakeTurns(t *testing.T) {
	b := setup(t)
	ep, _ := b.deadBacklog(20)
	var total atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { total.Add(int64(b.bulkReplay(ep, nil))) })
	}
	wg.Wait()
	require.EqualValues(t, 20, total.Load())
	require.Len(t, b.deliveries("status=pending&endpoint_id="+ep), 20)
}

// TestRetryMakesAQueuedDeliveryDueNow: /retry brings a failed delivery's
// next attempt forward without a new delivery; delivered and dead ones
// answer 409, as do replays of pending and failed ones.
func TestRetryMakesAQueuedDeliveryDueNow(t *testing.T) {
	b := setup(t)
	ep, id := b.deadBacklog(1)
	deadID := b.deliveries("endpoint_id=" + ep)[0].(map[string]any)["id"].(string)
	requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/deliveries/"+deadID+"/retry", nil), http.StatusConflict)

	require.Equal(t, 1, b.bulkReplay(ep, nil))
	require.Equal(t, 1, b.settle(id, sluice.DeliveryFailed, time.Now().Add(time.Hour)))
	failed := b.deliveries("status=failed&endpoint_id=" + ep)
	require.Len(t, failed, 1)
	fID := failed[0].(map[string]any)["id"].(string)
	requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/deliveries/"+fID+"/replay", nil), http.StatusConflict)
	require.Zero(t, b.settle(id, sluice.DeliveryDelivered, time.Now()), "not due for an hour")

	r := b.do(b.keyA, http.MethodPost, "/v1/deliveries/"+fID+"/retry", nil)
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	got := r.JSON(t)
	require.Equal(t, fID, got["id"])
	require.Equal(t, sluice.DeliveryFailed, got["status"])
	next, err := time.Parse(time.RFC3339Nano, got["next_attempt_at"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), next, 5*time.Second)
	require.EqualValues(t, 1, got["attempt_count"], "attempts are kept")

	require.Equal(t, 1, b.settle(id, sluice.DeliveryDelivered, time.Now()), "due now")
	requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/deliveries/"+fID+"/retry", nil), http.StatusConflict)
	require.Len(t, b.deliveries("endpoint_id="+ep), 2, "no new delivery")
	requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/deliveries/"+uuid.NewString()+"/retry", nil), http.StatusNotFound)
	requireProblem(t, b.do(b.keyB, http.MethodPost, "/v1/deliveries/"+fID+"/retry", nil), http.StatusNotFound)
}

// workReplays starts a River client that works the bulk replay queue (and
// nothing else) of the bundle's database until the test ends, and returns
// the ends of its runs: completed, failed, cancelled or snoozed.
func (b *testBundle) workReplays() <-chan *river.Event {
	t := b.t
	ws := river.NewWorkers()
	river.AddWorker(ws, replay.NewWorker(b.store, b.nudger, nil, slog.New(slog.DiscardHandler)))
	client, err := river.NewClient(riverpgxv5.New(b.store.Pool()), &river.Config{
		Workers: ws,
		Queues:  map[string]river.QueueConfig{jobs.QueueReplay: {MaxWorkers: 1}},
		Logger:  slog.New(slog.DiscardHandler),
		// It inserts dispatch jobs, which only the real worker process works.
		SkipUnknownJobCheck: true,
	})
	require.NoError(t, err)
	ended, unsubscribe := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed,
		river.EventKindJobCancelled, river.EventKindJobSnoozed)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		unsubscribe()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.Stop(ctx)
	})
	return ended
}

// replayCounts is how many replays of the endpoint's deliveries are
// pending, of how many distinct events and source deliveries, and how many
// staged ones are not replayed yet.
func (b *testBundle) replayCounts(endpointID uuid.UUID) (replays, events, sources, staged int) {
	b.t.Helper()
	const q = `
SELECT count(*), count(DISTINCT event_id), count(DISTINCT replayed_from),
       (SELECT coalesce(sum(queued - done), 0) FROM replay_requests WHERE endpoint_id = $1)
FROM deliveries WHERE endpoint_id = $1 AND replayed_from IS NOT NULL AND status = 'pending'`
	require.NoError(b.t, b.store.Pool().QueryRow(context.Background(), q, endpointID).Scan(&replays, &events, &sources, &staged))
	return replays, events, sources, staged
}

// TestLargeBulkReplayInBackground: 20,000 dead deliveries answer at once
// with the exact count; the first 1,000 are replayed by the request, the
// rest stay staged (and count as queued, so four more calls and single
// replays queue nothing) until the replay job has replayed them, each
// event once.
func TestLargeBulkReplayInBackground(t *testing.T) {
	b := setup(t)
	const n = 20_000
	ep := b.createEndpoint(b.keyA, map[string]any{"url": "http://127.0.0.1:9/hook"})["id"].(string)
	id := uuid.MustParse(ep)
	storetest.DeadBacklog(t, b.store, b.tenantA.ID, id, n)
	dead := map[string]any{"status": "dead"}

	requireProblem(t, b.do(b.keyB, http.MethodPost, "/v1/endpoints/"+ep+"/replay", dead), http.StatusNotFound)
	require.Equal(t, n, b.bulkReplay(ep, dead))
	replays, _, _, staged := b.replayCounts(id)
	require.Equal(t, replay.Inline, replays, "the request replays the first chunk itself")
	require.Equal(t, n-replay.Inline, staged, "and leaves the rest to the job")
	for range 4 {
		require.Zero(t, b.bulkReplay(ep, dead), "staged deliveries count as queued")
	}
	count, err := replay.CountReplayable(t.Context(), b.store, b.tenantA.ID, id, sluice.ReplayFilter{Status: sluice.DeliveryDead})
	require.NoError(t, err)
	require.Zero(t, count)
	var stagedID uuid.UUID
	require.NoError(t, b.store.Pool().QueryRow(t.Context(),
		"SELECT delivery_ids[cardinality(delivery_ids)] FROM replay_requests WHERE endpoint_id = $1", id).Scan(&stagedID))
	p := requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/deliveries/"+stagedID.String()+"/replay", nil), http.StatusConflict)
	require.Contains(t, p["detail"], "already queued")

	ended := b.workReplays()
	deadline := time.After(2 * time.Minute)
	for staged > 0 { // checked as each replay job completes
		select {
		case ev := <-ended:
			if ev.Kind == river.EventKindJobCompleted {
				_, _, _, staged = b.replayCounts(id)
			}
		case <-deadline:
			var state, errs string
			if js := jobstest.OfKind(t, b.store.Pool(), "replay"); len(js) > 0 {
				state, errs = js[0].State, js[0].Errors
			}
			t.Fatalf("the job left %d of %d staged; job %s, errors %s", staged, n, state, errs)
		}
	}
	replays, events, sources, _ := b.replayCounts(id)
	require.Equal(t, [3]int{n, n, n}, [3]int{replays, events, sources}, "each event replayed once, from its one dead delivery")
	require.Zero(t, b.bulkReplay(ep, dead), "the replays are queued")
}

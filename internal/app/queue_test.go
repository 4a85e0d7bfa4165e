package app_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

func TestFanoutTwiceInsertsNothingTwice(t *testing.T) {
	h := start(t, nil)
	a, b := receiver.New(t), receiver.New(t)
	h.endpoint(a, []string{"*"}, nil)
	h.endpoint(b, []string{"dup.*"}, nil)
	id := uuid.MustParse(h.post("dup.check", map[string]int{"x": 1}))
	eventually(t, 10*time.Second, func() bool { return a.Count() == 1 && b.Count() == 1 }, "one each")

	// Run the fan-out again by hand, twice, as a retried job would.
	for range 2 {
		_, n, err := fanout.Events(context.Background(), h.proc.Store, []uuid.UUID{id}, nil)
		require.NoError(t, err)
		require.Zero(t, n, "a re-run creates no delivery")
	}
	h.settle()
	require.Len(t, h.deliveries("event_id="+id.String()), 2)
	require.Equal(t, 1, a.Count())
	require.Equal(t, 1, b.Count())
}

func TestCoalescingReplacesQueuedPayload(t *testing.T) {
	// No workers at first: events are stored and their fan-out jobs queued,
	// and the test runs the fan-out itself, out of order and twice.
	h := startWith(t, nil, app.Roles{API: true})
	rcv := receiver.New(t)
	epID, _ := h.endpoint(rcv, []string{"*"}, nil)
	q := jobs.NewQueue(h.proc.River)

	var ids []uuid.UUID
	for i, key := range []string{"user-1", "user-2", "user-1", "user-1"} {
		payload := []byte(fmt.Sprintf(`{"i":%d}`, i))
		ev, _, err := fanout.InsertOne(context.Background(), h.proc.Store, h.tenant.ID,
			sluice.NewEvent{Type: "profile.updated", Payload: payload, CoalesceKey: &key}, q)
		require.NoError(t, err)
		ids = append(ids, ev.ID)
	}
	for _, batch := range [][]uuid.UUID{ids[:1], ids[1:2], ids[2:], ids[:1]} {
		_, _, err := fanout.Events(context.Background(), h.proc.Store, batch, nil)
		require.NoError(t, err)
	}
	queued := h.deliveries("endpoint_id=" + epID)
	require.Len(t, queued, 2, "user-1's three events share one delivery")
	byEvent := map[string]bool{}
	for _, d := range queued {
		byEvent[d.EventID] = true
	}
	require.True(t, byEvent[ids[1].String()], "user-2 keeps its own")
	require.True(t, byEvent[ids[3].String()], "user-1's delivery carries its newest event")

	// Now the workers run, including the queued fan-out jobs of all four
	// events: nothing older comes back.
	h.process(app.Roles{Worker: true})
	eventually(t, 10*time.Second, func() bool { return rcv.Count() == 2 }, "two deliveries")
	h.settle() // the four fan-out jobs have run
	require.Equal(t, 2, rcv.Count())
	got := map[string]bool{}
	for _, r := range rcv.Requests() {
		got[r.ID] = true
	}
	require.Equal(t, map[string]bool{ids[1].String(): true, ids[3].String(): true}, got)
}

// TestNoDeliveryStrandedByFinishingDispatch hammers the race where fan-out
// commits deliveries while the endpoint's dispatch job is deciding it is
// done: each poster posts its next event as soon as its last one has
// arrived, so that events land just as the runs drain. The sweeper is
// off, so nothing but the final check (store.FinishDispatch) and fan-out's
// wake-ups can bring a delivery to a dispatcher: one missed there would
// never arrive, however long the test waited.
func TestNoDeliveryStrandedByFinishingDispatch(t *testing.T) {
	h := start(t, map[string]string{"SLUICE_SWEEP_INTERVAL": "off"})
	rcvs := []*receiver.Receiver{receiver.New(t), receiver.New(t), receiver.New(t)}
	for _, r := range rcvs {
		h.endpoint(r, []string{"race.*"}, map[string]any{"max_in_flight": 2})
	}
	const posters, perPoster = 4, 60
	var wg sync.WaitGroup
	for p := range posters {
		wg.Go(func() {
			rcv := rcvs[p%len(rcvs)]
			for i := range perPoster {
				id := h.post("race.tick", map[string]int{"p": p, "i": i})
				if !rcv.Await(30*time.Second, func(reqs []receiver.Request) bool {
					return slices.ContainsFunc(reqs, func(r receiver.Request) bool { return r.ID == id })
				}) {
					t.Errorf("poster %d: event %d not delivered", p, i)
					return
				}
			}
		})
	}
	wg.Wait()
	for i, r := range rcvs {
		eventually(t, 30*time.Second, func() bool { return unique(r) == posters*perPoster }, "receiver %d got %d/%d", i, unique(r), posters*perPoster)
	}
}

func unique(r *receiver.Receiver) int {
	seen := map[string]bool{}
	for _, req := range r.Requests() {
		seen[req.ID] = true
	}
	return len(seen)
}

// TestDeliveryBehindTheClaimPositionIsSent: a run's next claim starts after
// its last full claim, so a delivery that lands behind that position (due
// earlier than what the run has claimed, as from a fan-out that committed
// late) is not claimed there. It is sent as soon as a claim comes up short
// and the run reads its queue from the front again, not when the run's
// budget (4 to 6 s) ends and a new run starts at the front.
func TestDeliveryBehindTheClaimPositionIsSent(t *testing.T) {
	h := start(t, nil)
	rcv := receiver.New(t)
	rcv.AnswerFunc(func(n int) receiver.Behavior {
		if n <= 2 {
			return receiver.Behavior{Delay: 300 * time.Millisecond} // the first claim's two, held
		}
		return receiver.Behavior{}
	})
	ep, _ := h.endpoint(rcv, []string{"pos.*"}, map[string]any{"max_in_flight": 2})
	h.postBatch("pos.a", 4)
	eventually(t, 10*time.Second, func() bool { return rcv.Count() >= 2 }, "the first claim's two in flight")

	// A delivery due an hour ago, behind every position the run will hold,
	// made without a wake-up; the post after it brings one, as the late
	// fan-out's own would.
	var behind uuid.UUID
	err := h.proc.Store.Pool().QueryRow(t.Context(), `
		WITH ev AS (
			INSERT INTO events (id, tenant_id, type, payload) VALUES (sluice_uuidv7(), $1, 'pos.behind', '{}') RETURNING id)
		INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, next_attempt_at)
		SELECT sluice_uuidv7(), $1, ev.id, $2, 'pos.behind', now() - interval '1 hour' FROM ev
		RETURNING event_id`, h.tenant.ID, ep).Scan(&behind)
	require.NoError(t, err)
	inserted := time.Now()
	h.post("pos.b", map[string]int{"n": 1})

	var sent time.Time
	eventually(t, 15*time.Second, func() bool {
		for _, r := range rcv.Requests() {
			if r.ID == behind.String() {
				sent = r.At
				return true
			}
		}
		return false
	}, "the delivery behind the position sent")
	require.Less(t, sent.Sub(inserted), 2500*time.Millisecond, "sent once a claim came up short, not at the next run")
	eventually(t, 10*time.Second, func() bool { return rcv.Count() >= 6 }, "all six sent (%d so far)", rcv.Count())
}

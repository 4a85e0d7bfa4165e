package app_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

func TestRetriesThenDeadThenReplay(t *testing.T) {
	h := start(t, map[string]string{"SLUICE_RETRY_SCHEDULE": "50ms,100ms"})
	rcv := receiver.New(t)
	rcv.Answer(receiver.Behavior{Status: 500, Body: "boom"})
	epID, _ := h.endpoint(rcv, []string{"*"}, nil)

	eventID := h.post("job.failed", map[string]int{"n": 1})
	var dead []delivery
	eventually(t, 10*time.Second, func() bool {
		dead = h.deliveries("status=dead&endpoint_id=" + epID)
		return len(dead) == 1
	}, "dead after the schedule")
	require.Equal(t, 3, rcv.Count(), "schedule of two waits: three attempts")
	var got delivery
	h.call(http.MethodGet, "/v1/deliveries/"+dead[0].ID, nil, http.StatusOK, &got)
	require.Equal(t, 3, got.AttemptCount)
	require.Len(t, got.Attempts, 3)
	for _, a := range got.Attempts {
		require.Equal(t, 500, *a.StatusCode)
		require.Equal(t, "boom", *a.ResponseBody)
		require.NotEmpty(t, *a.Error)
	}
	at := rcv.Requests()
	require.GreaterOrEqual(t, at[1].At.Sub(at[0].At), 35*time.Millisecond, "first wait ~50ms with jitter")
	require.GreaterOrEqual(t, at[2].At.Sub(at[1].At), 75*time.Millisecond, "second wait ~100ms with jitter")

	// Replay one: a new delivery linked to the dead one, delivered now.
	rcv.Answer(receiver.Behavior{})
	var replay delivery
	h.call(http.MethodPost, "/v1/deliveries/"+dead[0].ID+"/replay", nil, http.StatusAccepted, &replay)
	require.Equal(t, dead[0].ID, replay.ReplayedFrom)
	require.Equal(t, eventID, replay.EventID)
	eventually(t, 10*time.Second, func() bool { return rcv.Count() == 4 }, "replayed delivery")
	require.Equal(t, eventID, rcv.Requests()[3].ID, "webhook-id is stable across replays")
	eventually(t, 5*time.Second, func() bool {
		var d delivery
		h.call(http.MethodGet, "/v1/deliveries/"+replay.ID, nil, http.StatusOK, &d)
		return d.Status == "delivered"
	}, "replay delivered")
	h.call(http.MethodPost, "/v1/deliveries/"+uuid.NewString()+"/replay", nil, http.StatusNotFound, nil)
}

func TestBulkReplayOfDeadLetters(t *testing.T) {
	h := start(t, map[string]string{"SLUICE_RETRY_SCHEDULE": "10ms"})
	rcv := receiver.New(t)
	rcv.Answer(receiver.Behavior{Status: 503})
	epID, _ := h.endpoint(rcv, []string{"*"}, nil)
	for i := range 5 {
		h.post("bulk.item", map[string]int{"i": i})
	}
	eventually(t, 10*time.Second, func() bool { return len(h.deliveries("status=dead&endpoint_id="+epID)) == 5 }, "5 dead")

	rcv.Answer(receiver.Behavior{})
	var out struct{ Queued int }
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	h.call(http.MethodPost, "/v1/endpoints/"+epID+"/replay", map[string]any{"status": "dead", "since": since}, http.StatusAccepted, &out)
	require.Equal(t, 5, out.Queued)
	eventually(t, 10*time.Second, func() bool { return len(h.deliveries("status=delivered&endpoint_id="+epID)) == 5 }, "replays delivered")
	require.Equal(t, 15, rcv.Count())

	h.call(http.MethodPost, "/v1/endpoints/"+epID+"/replay", map[string]any{"until": since}, http.StatusAccepted, &out)
	require.Zero(t, out.Queued, "nothing before the window")
	h.call(http.MethodPost, "/v1/endpoints/"+epID+"/replay", map[string]any{"status": "pending"}, http.StatusUnprocessableEntity, nil)
}

func TestRedirectIsAFailure(t *testing.T) {
	h := start(t, map[string]string{"SLUICE_RETRY_SCHEDULE": "1h"})
	target := receiver.New(t)
	rcv := receiver.New(t)
	rcv.Answer(receiver.Behavior{Status: 302, Location: target.URL()})
	epID, _ := h.endpoint(rcv, []string{"*"}, nil)
	h.post("moved", map[string]int{"x": 1})
	eventually(t, 10*time.Second, func() bool { return len(h.deliveries("status=failed&endpoint_id="+epID)) == 1 }, "failed")
	var d delivery
	h.call(http.MethodGet, "/v1/deliveries/"+h.deliveries("endpoint_id=" + epID)[0].ID, nil, http.StatusOK, &d)
	require.Equal(t, 302, *d.Attempts[0].StatusCode)
	require.Zero(t, target.Count(), "the redirect was not followed before the attempt was recorded")
}

func TestSSRFGuardRefusesLoopback(t *testing.T) {
	h := start(t, map[string]string{"SLUICE_ALLOW_PRIVATE_TARGETS": "false", "SLUICE_RETRY_SCHEDULE": "1h"})
	rcv := receiver.New(t)
	// The API refuses loopback URLs outright; a public name could still
	// resolve to one, so store the endpoint directly, as if it had.
	ep, err := h.proc.Store.CreateEndpoint(context.Background(), h.tenant.ID, sluice.EndpointSettings{
		URL: rcv.URL(), MaxInFlight: 1, Headers: map[string]string{},
	}, storetest.Secret)
	require.NoError(t, err)
	h.call(http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": ep.ID, "event_types": []string{"*"}}, http.StatusCreated, nil)
	h.post("ssrf.probe", map[string]int{"x": 1})

	eventually(t, 10*time.Second, func() bool {
		return len(h.deliveries("status=failed&endpoint_id="+ep.ID.String())) == 1
	}, "refused attempt recorded")
	var d delivery
	h.call(http.MethodGet, "/v1/deliveries/"+h.deliveries("endpoint_id=" + ep.ID.String())[0].ID, nil, http.StatusOK, &d)
	require.Nil(t, d.Attempts[0].StatusCode)
	require.Contains(t, *d.Attempts[0].Error, "not allowed")
	require.Zero(t, rcv.Count(), "nothing reached the loopback receiver")
}

func TestTestEvent(t *testing.T) {
	h := start(t, nil)
	rcv, other := receiver.New(t), receiver.New(t)
	epID, _ := h.endpoint(rcv, nil, nil)
	h.endpoint(other, []string{"*"}, nil)
	var ev struct{ ID, Type string }
	h.call(http.MethodPost, "/v1/endpoints/"+epID+"/test", nil, http.StatusAccepted, &ev)
	require.Equal(t, "sluice.test", ev.Type)
	eventually(t, 10*time.Second, func() bool { return rcv.Count() == 1 }, "test event")
	require.Equal(t, ev.ID, rcv.Requests()[0].ID)
	require.True(t, rcv.Requests()[0].Verified)
	h.settle()
	require.Zero(t, other.Count(), "test events go to the one endpoint only")
}

func TestServiceUnavailableRetryAfterIsObeyed(t *testing.T) {
	h := start(t, map[string]string{"SLUICE_RETRY_SCHEDULE": "10ms,10ms"})
	rcv := receiver.New(t)
	rcv.AnswerFunc(func(n int) receiver.Behavior {
		if n == 1 {
			return receiver.Behavior{Status: 503, RetryAfter: "1"}
		}
		return receiver.Behavior{}
	})
	epID, _ := h.endpoint(rcv, []string{"*"}, nil)
	h.post("busy.receiver", map[string]int{"x": 1})
	eventually(t, 10*time.Second, func() bool { return len(h.deliveries("status=delivered&endpoint_id="+epID)) == 1 }, "delivered")
	reqs := rcv.Requests()
	require.Len(t, reqs, 2)
	require.GreaterOrEqual(t, reqs[1].At.Sub(reqs[0].At), time.Second, "a 503's Retry-After beats a 10ms schedule")
}

// TestLaterRetryIsQueuedWhenDue: a retry due beyond what a run sleeps
// through ends the run, which leaves the retry's time on the endpoint; the
// sweeper queues the endpoint's dispatch when it comes, and the retry
// arrives within a sweep of its time.
func TestLaterRetryIsQueuedWhenDue(t *testing.T) {
	h := start(t, map[string]string{"SLUICE_RETRY_SCHEDULE": "2s"})
	rcv := receiver.New(t)
	rcv.Answer(receiver.Behavior{Status: 500})
	epID, _ := h.endpoint(rcv, []string{"*"}, nil)
	h.post("job.failed", map[string]int{"n": 1})

	var retryDue, nextAttempt *time.Time
	eventually(t, 10*time.Second, func() bool {
		require.NoError(t, h.proc.Store.Pool().QueryRow(context.Background(),
			`SELECT e.retry_due_at, d.next_attempt_at FROM endpoints e JOIN deliveries d ON d.endpoint_id = e.id WHERE e.id = $1`,
			epID).Scan(&retryDue, &nextAttempt))
		return retryDue != nil
	}, "the run leaves the retry's time as it ends")
	require.Equal(t, 1, rcv.Count())
	require.True(t, retryDue.Equal(*nextAttempt), "the retry's own time: %v, %v", retryDue, nextAttempt)

	rcv.Answer(receiver.Behavior{})
	eventually(t, 10*time.Second, func() bool { return rcv.Count() == 2 }, "the retry")
	reqs := rcv.Requests()
	gap := reqs[1].At.Sub(reqs[0].At)
	require.GreaterOrEqual(t, gap, 1500*time.Millisecond, "not before its backoff (2 s, with jitter)")
	require.Less(t, gap, 2500*time.Millisecond+4*time.Second, "within a sweep or so of its time, not a walk's")
}

package app_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
	"github.com/sluice-dev/sluice/internal/testkit/smtpsink"
)

func TestCircuitOpensProbesClosesAndEmails(t *testing.T) {
	sink := smtpsink.Start(t)
	h := startTimed(t, map[string]string{
		"SLUICE_CIRCUIT_THRESHOLD": "3",
		"SLUICE_CIRCUIT_PROBE":     "200ms",
		"SLUICE_RETRY_SCHEDULE":    "10ms,10ms,10ms,10ms,10ms,10ms,10ms,10ms,10ms,10ms,10ms,10ms",
		"SLUICE_SMTP_URL":          sink.URL(),
		"SLUICE_PUBLIC_URL":        "http://sluice.test",
		// Its alerts are stored sealed, and the emails rendered from them
		// opened (the other email tests store them in clear).
		"SLUICE_PAYLOAD_ENCRYPTION": "on",
	}, app.Roles{API: true, Worker: true})
	var healthy atomic.Bool
	rcv := receiver.New(t)
	rcv.AnswerFunc(func(int) receiver.Behavior {
		if healthy.Load() {
			return receiver.Behavior{}
		}
		return receiver.Behavior{Status: 500, Body: "database down"}
	})
	epID, _ := h.endpoint(rcv, []string{"*"}, map[string]any{
		"max_in_flight": 1,
		"rate_limit":    map[string]int{"per_second": 10, "burst": 2},
	})

	h.post("circuit.trip", map[string]int{"n": 0})
	eventually(t, 10*time.Second, func() bool { return h.endpointState(epID).Circuit.State == "open" }, "circuit opens")
	// Exactly the threshold of failures, then nothing until the first probe
	// (200ms later), which a slow poll on a busy box may already see.
	if reqs := rcv.Requests(); len(reqs) > 3 {
		require.GreaterOrEqual(t, reqs[3].At.Sub(reqs[2].At), 180*time.Millisecond, "the fourth request is the probe")
	} else {
		require.Len(t, reqs, 3, "exactly the threshold of failures")
	}
	v := h.endpointState(epID)
	require.Equal(t, "circuit_open", v.Status)
	require.NotNil(t, v.Circuit.NextProbeAt)

	opened := sink.Wait(t, 1, 10*time.Second)[0]
	require.Equal(t, []string{"ops@acme.test"}, opened.To)
	require.Contains(t, opened.Subject, "opened")
	require.Contains(t, opened.Text, rcv.URL())
	require.Contains(t, opened.Text, "status 500")
	require.Contains(t, opened.Text, "http://sluice.test/endpoints/"+epID)

	// Deliveries keep queueing while it is open.
	for i := range 20 {
		h.post("circuit.backlog", map[string]int{"n": i + 1})
	}
	eventually(t, 5*time.Second, func() bool { return h.endpointState(epID).QueuedDeliveries == 21 }, "21 queued")

	// Probes: one request each, at intervals that double (200, 400, 800ms).
	eventually(t, 10*time.Second, func() bool { return rcv.Count() >= 6 }, "three probes")
	h.finished(jobs.AlertArgs{}.Kind()) // the first two probes are recorded, with any alert of theirs
	reqs := rcv.Requests()
	for i, want := range []time.Duration{200, 400, 800} {
		gap := reqs[3+i].At.Sub(reqs[2+i].At)
		require.GreaterOrEqual(t, gap, want*time.Millisecond*9/10, "probe %d", i+1)
		require.Less(t, gap, want*time.Millisecond*2, "probe %d", i+1)
	}
	require.Len(t, sink.Messages(), 1, "failed probes send no email")

	// Recovery: the next probe succeeds, the circuit closes, the backlog
	// drains at the rate limit from an empty bucket.
	healthy.Store(true)
	eventually(t, 10*time.Second, func() bool { return h.endpointState(epID).Circuit.State == "closed" }, "circuit closes")
	closed := sink.Wait(t, 2, 10*time.Second)[1]
	require.Contains(t, closed.Subject, "closed")
	eventually(t, 15*time.Second, func() bool { return h.endpointState(epID).QueuedDeliveries == 0 }, "backlog drains")
	var drained []receiver.Request
	for _, r := range rcv.Requests() {
		if r.At.After(reqs[5].At) && !strings.Contains(string(r.Body), `"n":0}`) {
			drained = append(drained, r)
		}
	}
	require.GreaterOrEqual(t, len(drained), 19)
	for i := range drained {
		j := i
		for j < len(drained) && drained[j].At.Sub(drained[i].At) < time.Second {
			j++
		}
		require.LessOrEqual(t, j-i, 12, "drained within burst + rate, never as a burst")
	}
	h.settle() // every alert recorded has been mailed
	require.Len(t, sink.Messages(), 2, "one email per transition")
}

func TestCircuitClosedByHand(t *testing.T) {
	sink := smtpsink.Start(t)
	h := start(t, map[string]string{
		"SLUICE_CIRCUIT_THRESHOLD": "2",
		"SLUICE_CIRCUIT_PROBE":     "1h",
		"SLUICE_SMTP_URL":          sink.URL(),
	})
	var healthy atomic.Bool
	rcv := receiver.New(t)
	rcv.AnswerFunc(func(int) receiver.Behavior {
		if healthy.Load() {
			return receiver.Behavior{}
		}
		return receiver.Behavior{Status: 503}
	})
	epID, _ := h.endpoint(rcv, []string{"*"}, nil)
	h.post("x.y", map[string]int{"n": 1})
	eventually(t, 10*time.Second, func() bool { return h.endpointState(epID).Circuit.State == "open" }, "open")
	sink.Wait(t, 1, 10*time.Second)

	healthy.Store(true)
	var v endpointView
	h.call(http.MethodPost, "/v1/endpoints/"+epID+"/circuit/close", nil, http.StatusOK, &v)
	require.Equal(t, "closed", v.Circuit.State)
	require.Equal(t, "active", v.Status)
	eventually(t, 5*time.Second, func() bool { return rcv.Count() == 3 }, "the parked dispatch wakes at once, not in an hour")
	require.Contains(t, sink.Wait(t, 2, 10*time.Second)[1].Subject, "closed")

	// Closing a closed circuit is a no-op: no email. An alert would have
	// been queued in the close's own transaction, and mailed once settled.
	h.call(http.MethodPost, "/v1/endpoints/"+epID+"/circuit/close", nil, http.StatusOK, nil)
	h.settle()
	require.Len(t, sink.Messages(), 2)
}

func TestAlertEmailRetriedWhenMailServerFails(t *testing.T) {
	sink := smtpsink.Start(t)
	sink.FailNext(1)
	h := start(t, map[string]string{"SLUICE_CIRCUIT_THRESHOLD": "1", "SLUICE_CIRCUIT_PROBE": "1h", "SLUICE_SMTP_URL": sink.URL()})
	rcv, other := receiver.New(t), receiver.New(t)
	rcv.Answer(receiver.Behavior{Status: 500})
	h.endpoint(rcv, []string{"*"}, nil)
	h.endpoint(other, []string{"*"}, nil)
	h.post("x.y", map[string]int{"n": 1})
	eventually(t, 5*time.Second, func() bool { return other.Count() == 1 }, "delivery is not blocked by mail")
	msgs := sink.Wait(t, 1, 20*time.Second)
	require.Len(t, msgs, 1)
	// The endpoint stays parked behind its open circuit, so wait for the
	// alert job alone: once it has finished, it sends nothing more.
	h.finished(jobs.AlertArgs{}.Kind())
	require.Len(t, sink.Messages(), 1, "the failed send was retried once, not duplicated")
}

package app_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
	"github.com/sluice-dev/sluice/internal/testkit/smtpsink"
)

// TestConsumerEventsReachOnlyTheirReceivers runs routing end to end, through
// the workers, against real receivers: each consumer's receiver gets its own
// events and the broadcasts, the tenant's receiver its own events and the
// broadcasts, and nothing else arrives anywhere.
func TestConsumerEventsReachOnlyTheirReceivers(t *testing.T) {
	h := start(t, nil)
	rcvs := map[string]*receiver.Receiver{"": receiver.New(t), "cus_1": receiver.New(t), "cus_2": receiver.New(t)}
	for uid, rcv := range rcvs {
		extra := map[string]any{}
		if uid != "" {
			h.call(http.MethodPut, "/v1/consumers/"+uid, map[string]any{"name": uid}, http.StatusCreated, nil)
			extra["consumer"] = uid
		}
		h.endpoint(rcv, []string{"invoice.*"}, extra)
	}
	post := func(body map[string]any) string {
		var ev struct{ ID string }
		h.call(http.MethodPost, "/v1/events", body, http.StatusAccepted, &ev)
		return ev.ID
	}
	want := map[string][]string{}
	for i := range 5 {
		for _, uid := range []string{"cus_1", "cus_2"} {
			id := post(map[string]any{"type": "invoice.paid", "payload": map[string]int{"i": i}, "consumer": uid})
			want[uid] = append(want[uid], id)
		}
		id := post(map[string]any{"type": "invoice.paid", "payload": map[string]int{"i": i}})
		want[""] = append(want[""], id)
	}
	b := post(map[string]any{"type": "invoice.voided", "payload": map[string]int{}, "broadcast": true})
	for uid := range want {
		want[uid] = append(want[uid], b)
	}
	for uid, rcv := range rcvs {
		eventually(t, 10*time.Second, func() bool { return rcv.Count() >= len(want[uid]) }, "receiver %q gets its events", uid)
	}
	h.settle() // anything wrongly routed has arrived by now
	for uid, rcv := range rcvs {
		var got []string
		for _, req := range rcv.Requests() {
			got = append(got, req.Header.Get("webhook-id"))
		}
		require.ElementsMatch(t, want[uid], got, "receiver %q", uid)
	}
}

// TestCircuitEmailGoesToTheConsumer: a consumer's endpoint alerts the
// consumer's alert address, not the tenant's.
func TestCircuitEmailGoesToTheConsumer(t *testing.T) {
	sink := smtpsink.Start(t)
	h := startWith(t, map[string]string{
		"SLUICE_CIRCUIT_THRESHOLD": "2",
		"SLUICE_CIRCUIT_PROBE":     "1h",
		"SLUICE_RETRY_SCHEDULE":    "10ms,10ms,10ms,10ms,10ms",
		"SLUICE_SMTP_URL":          sink.URL(),
	}, app.Roles{API: true, Worker: true})
	h.call(http.MethodPut, "/v1/consumers/cus_9", map[string]any{"alert_email": "alerts@customer.test"}, http.StatusCreated, nil)
	rcv := receiver.New(t)
	rcv.AnswerFunc(func(int) receiver.Behavior { return receiver.Behavior{Status: 500} })
	h.endpoint(rcv, []string{"*"}, map[string]any{"consumer": "cus_9", "max_in_flight": 1})
	h.call(http.MethodPost, "/v1/events", map[string]any{"type": "x", "payload": map[string]int{}, "consumer": "cus_9"}, http.StatusAccepted, nil)
	opened := sink.Wait(t, 1, 10*time.Second)[0]
	require.Equal(t, []string{"alerts@customer.test"}, opened.To)
	require.Contains(t, opened.Subject, "opened")
}

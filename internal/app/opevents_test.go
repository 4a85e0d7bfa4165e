package app_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
	"github.com/sluice-dev/sluice/internal/testkit/smtpsink"
)

// opEvent is an operational event as a receiver gets it.
type opEvent struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Data struct {
		EndpointID string  `json:"endpoint_id"`
		URL        string  `json:"url"`
		Consumer   *string `json:"consumer"`
		Reason     string  `json:"reason"`
		LastError  string  `json:"last_error"`
		DeliveryID string  `json:"delivery_id"`
		EventID    string  `json:"event_id"`
		EventType  string  `json:"event_type"`
		Attempts   int     `json:"attempts"`
		LastStatus *int    `json:"last_status"`
	} `json:"data"`
}

// opEvents decodes what rcv received of Sluice's own types, requiring each
// to be signed with its secret.
func opEvents(t *testing.T, rcv *receiver.Receiver) []opEvent {
	t.Helper()
	var out []opEvent
	for _, r := range rcv.Requests() {
		var ev opEvent
		require.NoError(t, json.Unmarshal(r.Body, &ev))
		if strings.HasPrefix(ev.Type, "sluice.") {
			require.True(t, r.Verified, "%s arrives signed", ev.Type)
			out = append(out, ev)
		}
	}
	return out
}

func opTypes(evs []opEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// noOpEvents requires that rcv received none of Sluice's own types.
func noOpEvents(t *testing.T, rcv *receiver.Receiver, who string) {
	t.Helper()
	for _, r := range rcv.Requests() {
		var ev opEvent
		require.NoError(t, json.Unmarshal(r.Body, &ev))
		require.False(t, strings.HasPrefix(ev.Type, "sluice."), "%s got %s", who, ev.Type)
	}
}

type disabledView struct {
	Status           string  `json:"status"`
	Disabled         bool    `json:"disabled"`
	DisabledReason   *string `json:"disabled_reason"`
	QueuedDeliveries int     `json:"queued_deliveries"`
}

func (h *harness) disabledState(id string) disabledView {
	h.t.Helper()
	var v disabledView
	h.call(http.MethodGet, "/v1/endpoints/"+id, nil, http.StatusOK, &v)
	return v
}

// TestGoneDisablesAtOnceAndKeepsTheQueue: a 410 disables the endpoint after
// one attempt (disabled_reason "gone"), mails the owner and emits
// sluice.endpoint.disabled to the tenant's endpoint subscribed to
// sluice.* (not to one subscribed to *, nor to a consumer's); new events no
// longer queue for it; the deliveries it had are delivered, and only they,
// once it is enabled again, which emits sluice.endpoint.enabled.
func TestGoneDisablesAtOnceAndKeepsTheQueue(t *testing.T) {
	sink := smtpsink.Start(t)
	h := start(t, map[string]string{"SLUICE_SMTP_URL": sink.URL(), "SLUICE_RETRY_SCHEDULE": "10ms,10ms,10ms"})
	var back atomic.Bool
	gone := receiver.New(t)
	gone.AnswerFunc(func(int) receiver.Behavior {
		if back.Load() {
			return receiver.Behavior{}
		}
		return receiver.Behavior{Status: http.StatusGone}
	})
	goneID, _ := h.endpoint(gone, []string{"order.*"}, map[string]any{"max_in_flight": 1})
	ops, star, theirs := receiver.New(t), receiver.New(t), receiver.New(t)
	h.endpoint(ops, []string{"sluice.*"}, nil)
	h.endpoint(star, []string{"*"}, nil)
	h.call(http.MethodPut, "/v1/consumers/cus_2", map[string]any{"name": "other"}, http.StatusCreated, nil)
	h.endpoint(theirs, []string{"sluice.*"}, map[string]any{"consumer": "cus_2"})

	// One batch: five deliveries queued before the first attempt.
	h.postBatch("order.created", 5)
	eventually(t, 10*time.Second, func() bool { return h.disabledState(goneID).Disabled }, "410 disables the endpoint")
	v := h.disabledState(goneID)
	require.Equal(t, "disabled", v.Status)
	require.NotNil(t, v.DisabledReason)
	require.Equal(t, "gone", *v.DisabledReason)
	require.Equal(t, 5, v.QueuedDeliveries, "queued deliveries are kept")

	mail := sink.Wait(t, 1, 10*time.Second)[0]
	require.Equal(t, []string{"ops@acme.test"}, mail.To)
	require.Contains(t, mail.Subject, "disabled")
	require.Contains(t, mail.Text, gone.URL())

	eventually(t, 10*time.Second, func() bool { return len(opEvents(t, ops)) >= 1 }, "sluice.endpoint.disabled arrives")
	ev := opEvents(t, ops)[0]
	require.Equal(t, "sluice.endpoint.disabled", ev.Type)
	require.Equal(t, goneID, ev.Data.EndpointID)
	require.Equal(t, gone.URL(), ev.Data.URL)
	require.Nil(t, ev.Data.Consumer)
	require.Equal(t, "gone", ev.Data.Reason)

	// New events no longer queue for it.
	h.post("order.created", map[string]int{"late": 1})
	eventually(t, 10*time.Second, func() bool { return star.Count() >= 6 }, "the late event is delivered elsewhere")
	require.Equal(t, 5, h.disabledState(goneID).QueuedDeliveries, "no delivery for a disabled endpoint")
	require.Equal(t, 1, gone.Count(), "one attempt, then nothing while disabled")

	back.Store(true)
	var out disabledView
	h.call(http.MethodPatch, "/v1/endpoints/"+goneID, map[string]any{"disabled": false}, http.StatusOK, &out)
	require.Nil(t, out.DisabledReason)
	h.settle()
	require.Equal(t, 6, gone.Count(), "the five kept deliveries (one retried), not the late event")
	for _, r := range gone.Requests() {
		require.NotContains(t, string(r.Body), `"late"`)
	}
	require.Equal(t, []string{"sluice.endpoint.disabled", "sluice.endpoint.enabled"}, opTypes(opEvents(t, ops)))
	noOpEvents(t, star, "the endpoint subscribed to *")
	noOpEvents(t, theirs, "another consumer's endpoint")
	require.Len(t, sink.Messages(), 1, "enabling by hand sends no email")
}

// TestDisableAfterDisablesAFailingEndpoint: a consumer's endpoint whose
// attempts all fail for SLUICE_DISABLE_AFTER while its circuit is open is
// disabled ("failing"); the circuit's opening and the disabling reach the
// tenant's own sluice.* endpoint and the consumer's, never another
// consumer's nor the tenant's endpoint subscribed to *.
func TestDisableAfterDisablesAFailingEndpoint(t *testing.T) {
	sink := smtpsink.Start(t)
	h := start(t, map[string]string{
		"SLUICE_SMTP_URL":          sink.URL(),
		"SLUICE_DISABLE_AFTER":     "300ms",
		"SLUICE_CIRCUIT_THRESHOLD": "2",
		"SLUICE_CIRCUIT_PROBE":     "100ms",
		"SLUICE_RETRY_SCHEDULE":    "10ms,10ms,10ms,10ms,10ms,10ms,10ms,10ms,10ms,10ms",
	})
	for _, uid := range []string{"cus_1", "cus_2"} {
		h.call(http.MethodPut, "/v1/consumers/"+uid, map[string]any{"name": uid}, http.StatusCreated, nil)
	}
	failing := receiver.New(t)
	failing.Answer(receiver.Behavior{Status: 500, Body: "down"})
	failingID, _ := h.endpoint(failing, []string{"order.*"}, map[string]any{"consumer": "cus_1", "max_in_flight": 1})
	own, mine, theirs, star := receiver.New(t), receiver.New(t), receiver.New(t), receiver.New(t)
	h.endpoint(own, []string{"sluice.*"}, nil)
	h.endpoint(mine, []string{"sluice.endpoint.disabled", "sluice.endpoint.circuit_opened"}, map[string]any{"consumer": "cus_1"})
	h.endpoint(theirs, []string{"sluice.*"}, map[string]any{"consumer": "cus_2"})
	h.endpoint(star, []string{"*"}, nil)

	for i := range 3 {
		h.call(http.MethodPost, "/v1/events", map[string]any{"type": "order.created", "payload": map[string]int{"i": i}, "consumer": "cus_1"}, http.StatusAccepted, nil)
	}
	eventually(t, 15*time.Second, func() bool { return h.disabledState(failingID).Disabled }, "the failing endpoint is disabled")
	v := h.disabledState(failingID)
	require.Equal(t, "failing", *v.DisabledReason)
	require.Equal(t, 3, v.QueuedDeliveries, "its deliveries are kept")

	want := []string{"sluice.endpoint.circuit_opened", "sluice.endpoint.disabled"}
	for name, rcv := range map[string]*receiver.Receiver{"tenant's own": own, "the consumer's": mine} {
		eventually(t, 10*time.Second, func() bool { return len(opEvents(t, rcv)) >= 2 }, "%s endpoint gets both", name)
		evs := opEvents(t, rcv)
		require.ElementsMatch(t, want, opTypes(evs), name)
		for _, ev := range evs {
			require.Equal(t, failingID, ev.Data.EndpointID)
			require.Equal(t, "cus_1", *ev.Data.Consumer)
			if ev.Type == "sluice.endpoint.disabled" {
				require.Equal(t, "failing", ev.Data.Reason)
				require.Contains(t, ev.Data.LastError, "500")
			}
		}
	}
	mails := sink.Wait(t, 2, 10*time.Second)
	var subjects []string
	for _, m := range mails {
		require.Equal(t, []string{"ops@acme.test"}, m.To)
		subjects = append(subjects, m.Subject)
	}
	require.Contains(t, strings.Join(subjects, "\n"), "Endpoint disabled")
	h.finished(jobs.FanoutArgs{}.Kind())
	eventually(t, 10*time.Second, func() bool { return own.Count() >= 2 && mine.Count() >= 2 }, "settled")
	noOpEvents(t, theirs, "another consumer's endpoint")
	noOpEvents(t, star, "the endpoint subscribed to *")
}

// TestDeadDeliveryPostsOneOpEvent: a delivery going dead emits
// sluice.delivery.dead naming it; that event's own delivery going dead at
// a failing endpoint emits nothing more.
func TestDeadDeliveryPostsOneOpEvent(t *testing.T) {
	h := start(t, map[string]string{"SLUICE_RETRY_SCHEDULE": "10ms"})
	bad, opsDown, ops := receiver.New(t), receiver.New(t), receiver.New(t)
	bad.Answer(receiver.Behavior{Status: 500})
	opsDown.Answer(receiver.Behavior{Status: 503})
	badID, _ := h.endpoint(bad, []string{"order.*"}, nil)
	h.endpoint(opsDown, []string{"sluice.*"}, nil)
	h.endpoint(ops, []string{"sluice.delivery.dead"}, nil)

	eventID := h.post("order.created", map[string]int{"n": 1})
	eventually(t, 10*time.Second, func() bool { return len(opEvents(t, ops)) >= 1 }, "sluice.delivery.dead arrives")
	h.settle()
	evs := opEvents(t, ops)
	require.Len(t, evs, 1, "one dead letter, one event: none about the dead operational event")
	ev := evs[0]
	require.Equal(t, "sluice.delivery.dead", ev.Type)
	require.Equal(t, badID, ev.Data.EndpointID)
	require.Equal(t, eventID, ev.Data.EventID)
	require.Equal(t, "order.created", ev.Data.EventType)
	require.Equal(t, 2, ev.Data.Attempts)
	require.NotNil(t, ev.Data.LastStatus)
	require.Equal(t, 500, *ev.Data.LastStatus)
	require.NotEmpty(t, ev.Data.DeliveryID)
	require.Equal(t, 2, opsDown.Count(), "the operational event went dead at the failing endpoint")

	var page struct{ Data []struct{ ID string } }
	h.call(http.MethodGet, "/v1/events?type=sluice.delivery.dead", nil, http.StatusOK, &page)
	require.Len(t, page.Data, 1)
}

// TestSluiceTypesAreReserved: tenants cannot post or define sluice.* types;
// the catalogue lists them with schemas; sluice.test still works.
func TestSluiceTypesAreReserved(t *testing.T) {
	h := start(t, nil)
	h.call(http.MethodPost, "/v1/events", map[string]any{"type": "sluice.endpoint.disabled", "payload": map[string]int{}}, http.StatusUnprocessableEntity, nil)
	h.call(http.MethodPost, "/v1/events", map[string]any{"type": "sluice.test", "payload": map[string]int{}}, http.StatusUnprocessableEntity, nil)
	h.call(http.MethodPut, "/v1/event-types/sluice.delivery.dead", map[string]any{"description": "mine"}, http.StatusUnprocessableEntity, nil)
	var page struct {
		Data []struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		}
	}
	h.call(http.MethodGet, "/v1/event-types", nil, http.StatusOK, &page)
	names := map[string]bool{}
	for _, et := range page.Data {
		names[et.Name] = len(et.Schema) > 0
	}
	for _, name := range []string{"sluice.endpoint.disabled", "sluice.endpoint.enabled", "sluice.endpoint.circuit_opened",
		"sluice.endpoint.circuit_closed", "sluice.delivery.dead"} {
		require.True(t, names[name], "%s listed with a schema", name)
	}
	rcv := receiver.New(t)
	id, _ := h.endpoint(rcv, []string{"order.*"}, nil)
	h.call(http.MethodPost, "/v1/endpoints/"+id+"/test", nil, http.StatusAccepted, nil)
	eventually(t, 10*time.Second, func() bool { return rcv.Count() == 1 }, "sluice.test arrives")
}

// TestCircuitEventsReachSubscribers: a circuit opening, closing after a
// probe, and closing by hand each post their operational event, signed,
// to the tenant's endpoint subscribed to sluice.endpoint.*.
func TestCircuitEventsReachSubscribers(t *testing.T) {
	h := start(t, map[string]string{
		"SLUICE_CIRCUIT_THRESHOLD": "2",
		"SLUICE_CIRCUIT_PROBE":     "300ms",
		"SLUICE_RETRY_SCHEDULE":    "10ms,10ms,10ms,10ms,10ms,10ms,10ms,10ms,10ms,10ms",
	})
	ops := receiver.New(t)
	h.endpoint(ops, []string{"sluice.endpoint.*"}, nil)
	find := func(typ, endpointID string) *opEvent {
		for _, ev := range opEvents(t, ops) {
			if ev.Type == typ && ev.Data.EndpointID == endpointID {
				return &ev
			}
		}
		return nil
	}
	arrives := func(typ, endpointID string) opEvent {
		t.Helper()
		eventually(t, 10*time.Second, func() bool { return find(typ, endpointID) != nil }, "%s about %s arrives", typ, endpointID)
		return *find(typ, endpointID)
	}

	var healthy atomic.Bool
	recovering, failing := receiver.New(t), receiver.New(t)
	recovering.AnswerFunc(func(int) receiver.Behavior {
		if healthy.Load() {
			return receiver.Behavior{}
		}
		return receiver.Behavior{Status: 500}
	})
	failing.Answer(receiver.Behavior{Status: 500})
	recoveringID, _ := h.endpoint(recovering, []string{"order.*"}, map[string]any{"max_in_flight": 1})
	failingID, _ := h.endpoint(failing, []string{"invoice.*"}, map[string]any{"max_in_flight": 1})
	for i := range 3 {
		h.post("order.created", map[string]int{"i": i})
		h.post("invoice.paid", map[string]int{"i": i})
	}

	opened := arrives("sluice.endpoint.circuit_opened", recoveringID)
	require.Equal(t, "failures", opened.Data.Reason)
	require.Equal(t, recovering.URL(), opened.Data.URL)
	healthy.Store(true)
	require.Equal(t, "probe_succeeded", arrives("sluice.endpoint.circuit_closed", recoveringID).Data.Reason)

	arrives("sluice.endpoint.circuit_opened", failingID)
	h.call(http.MethodPost, "/v1/endpoints/"+failingID+"/circuit/close", nil, http.StatusOK, nil)
	require.Equal(t, "manual", arrives("sluice.endpoint.circuit_closed", failingID).Data.Reason)
}

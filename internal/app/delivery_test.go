package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

func TestDeliveryIsSignedStandardWebhook(t *testing.T) {
	h := start(t, nil)
	rcv := receiver.New(t)
	epID, _ := h.endpoint(rcv, []string{"order.created"}, map[string]any{"headers": map[string]string{"X-Team": "billing"}})

	payload := map[string]any{"order": 42, "note": "<b>&</b>", "items": []any{1.5, "x"}}
	eventID := h.post("order.created", payload)
	eventually(t, 10*time.Second, func() bool { return rcv.Count() == 1 }, "delivery")

	req := rcv.Requests()[0]
	require.True(t, req.Verified, "the Standard Webhooks library verifies the signature")
	require.Equal(t, eventID, req.ID)
	require.Equal(t, "application/json", req.Header.Get("Content-Type"))
	require.Contains(t, req.Header.Get("User-Agent"), "Sluice")
	require.Equal(t, "billing", req.Header.Get("X-Team"))
	ts, err := strconv.ParseInt(req.Header.Get("webhook-timestamp"), 10, 64)
	require.NoError(t, err)
	require.InDelta(t, time.Now().Unix(), ts, 30)

	var body struct {
		ID, Type, Timestamp string
		Data                json.RawMessage
	}
	require.NoError(t, json.Unmarshal(req.Body, &body))
	require.Equal(t, eventID, body.ID)
	require.Equal(t, "order.created", body.Type)
	_, err = time.Parse(time.RFC3339, body.Timestamp)
	require.NoError(t, err)
	want, _ := json.Marshal(payload)
	require.JSONEq(t, string(want), string(body.Data))
	require.Contains(t, string(req.Body), `"note":"\u003cb\u003e\u0026\u003c/b\u003e"`, "payload bytes are sent as posted")

	eventually(t, 5*time.Second, func() bool {
		d := h.deliveries("event_id=" + eventID)
		return len(d) == 1 && d[0].Status == "delivered"
	}, "delivered status")
	var got delivery
	h.call(http.MethodGet, "/v1/deliveries/"+h.deliveries("event_id=" + eventID)[0].ID, nil, http.StatusOK, &got)
	require.Equal(t, epID, got.EndpointID)
	require.Equal(t, 1, got.AttemptCount)
	require.Len(t, got.Attempts, 1)
	require.Equal(t, 200, *got.Attempts[0].StatusCode)

	var ev struct{ Deliveries []delivery }
	h.call(http.MethodGet, "/v1/events/"+eventID, nil, http.StatusOK, &ev)
	require.Len(t, ev.Deliveries, 1)
	require.Equal(t, "delivered", ev.Deliveries[0].Status)

	res, err := http.Get(h.srv.URL + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	metrics, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Contains(t, string(metrics), `sluice_delivery_attempts_total{outcome="delivered"}`)
	require.Contains(t, string(metrics), `sluice_events_ingested_total`)
}

func TestFanoutMatchesSubscriptions(t *testing.T) {
	h := start(t, nil)
	all, exact, prefix, video, none := receiver.New(t), receiver.New(t), receiver.New(t), receiver.New(t), receiver.New(t)
	h.endpoint(all, []string{"*"}, nil)
	h.endpoint(exact, []string{"order.created"}, nil)
	h.endpoint(prefix, []string{"order.*"}, nil)
	h.endpoint(video, []string{"video.*", "order.created"}, nil)
	h.endpoint(none, nil, nil)

	for _, typ := range []string{"order.created", "order.updated", "video.encoded", "orders.created", "order"} {
		h.post(typ, map[string]any{"t": typ})
	}
	eventually(t, 10*time.Second, func() bool {
		return all.Count() == 5 && exact.Count() == 1 && prefix.Count() == 2 && video.Count() == 2
	}, "fan-out: all=%d exact=%d prefix=%d video=%d", all.Count(), exact.Count(), prefix.Count(), video.Count())
	h.settle()
	require.Equal(t, 5, all.Count(), "no duplicates")
	require.Equal(t, 2, video.Count(), "two matching patterns still make one delivery")
	require.Zero(t, none.Count())
}

func TestBatchIngest(t *testing.T) {
	h := start(t, nil)
	rcv := receiver.New(t)
	h.endpoint(rcv, []string{"batch.*"}, nil)

	var events []map[string]any
	for i := range 50 {
		events = append(events, map[string]any{"type": "batch.item", "payload": map[string]int{"i": i}})
	}
	var out struct {
		Data []struct {
			ID      string
			Payload map[string]int
		}
	}
	h.call(http.MethodPost, "/v1/events/batch", map[string]any{"events": events}, http.StatusAccepted, &out)
	require.Len(t, out.Data, 50)
	for i, ev := range out.Data {
		require.Equal(t, i, ev.Payload["i"], "same order as posted")
	}
	eventually(t, 10*time.Second, func() bool { return rcv.Count() == 50 }, "batch delivered")

	h.call(http.MethodPost, "/v1/events/batch", map[string]any{"events": []any{}}, http.StatusUnprocessableEntity, nil)
	obj := map[string]int{"n": 1}
	bad := []any{map[string]any{"type": "ok", "payload": obj}, map[string]any{"type": "no spaces", "payload": obj}}
	var problem struct{ Errors []struct{ Field string } }
	h.call(http.MethodPost, "/v1/events/batch", map[string]any{"events": bad}, http.StatusUnprocessableEntity, &problem)
	require.Equal(t, "events[1].type", problem.Errors[0].Field)
	many := make([]any, 1001)
	for i := range many {
		many[i] = map[string]any{"type": "x", "payload": obj}
	}
	h.call(http.MethodPost, "/v1/events/batch", map[string]any{"events": many}, http.StatusUnprocessableEntity, nil)
	big := map[string]any{"type": "x", "payload": map[string]string{"s": strings.Repeat("a", 300<<10)}}
	h.call(http.MethodPost, "/v1/events/batch", map[string]any{"events": []any{big}}, http.StatusRequestEntityTooLarge, nil)
	h.call(http.MethodPost, "/v1/events", big, http.StatusRequestEntityTooLarge, nil)
}

func TestIdempotencyKey(t *testing.T) {
	h := start(t, nil)
	rcv := receiver.New(t)
	h.endpoint(rcv, []string{"*"}, nil)
	body := map[string]any{"type": "pay.done", "payload": map[string]int{"n": 1}}

	var first, second struct{ ID string }
	h.call(http.MethodPost, "/v1/events", body, http.StatusAccepted, &first, "Idempotency-Key", "k-1")
	hdr := h.call(http.MethodPost, "/v1/events", body, http.StatusAccepted, &second, "Idempotency-Key", "k-1")
	require.Equal(t, first.ID, second.ID)
	require.Equal(t, "true", hdr.Get("Idempotent-Replayed"))

	other := map[string]any{"type": "pay.done", "payload": map[string]int{"n": 2}}
	h.call(http.MethodPost, "/v1/events", other, http.StatusConflict, nil, "Idempotency-Key", "k-1")

	var list struct{ Data []any }
	h.call(http.MethodGet, "/v1/events", nil, http.StatusOK, &list)
	require.Len(t, list.Data, 1, "the repeated request created nothing")
	eventually(t, 10*time.Second, func() bool { return rcv.Count() == 1 }, "delivery")
	h.settle()
	require.Equal(t, 1, rcv.Count())
}

func TestRotationSignsWithBothSecrets(t *testing.T) {
	h := start(t, nil)
	rcv := receiver.New(t)
	epID, oldSecret := h.endpoint(rcv, []string{"*"}, nil)
	var rotated struct{ Secret string }
	h.call(http.MethodPost, "/v1/endpoints/"+epID+"/secret/rotate", nil, http.StatusOK, &rotated)

	h.post("a.b", map[string]int{"x": 1})
	eventually(t, 10*time.Second, func() bool { return rcv.Count() == 1 }, "delivery")
	req := rcv.Requests()[0]
	require.Len(t, strings.Fields(req.Header.Get("webhook-signature")), 2)
	for _, secret := range []string{oldSecret, rotated.Secret} {
		wh, err := standardwebhooks.NewWebhook(secret)
		require.NoError(t, err)
		require.NoError(t, wh.Verify(req.Body, req.Header), "verifies with %s", secret[:12])
	}
}

package app_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/testkit/fifocheck"
)

// TestFIFOEndpointsDeliverEachLineInOrder: two FIFO endpoints served by two
// worker processes, receivers that answer 500, time out or reset the
// connection at random, four lines (three ordering keys and none) posted
// one event after another, some of them with an Idempotency-Key (stored
// with a fan-out job: late routing), then a batch mixing the lines. Each
// line arrives in order, each event only after the one before it was
// answered 200, one request of a line at a time, numbered 1, 2, 3, ...
// with a resend carrying its first number. A replay then goes to the back
// of its line with the next number, before an event posted after it.
func TestFIFOEndpointsDeliverEachLineInOrder(t *testing.T) {
	retries := strings.Repeat("10ms,", 39) + "10ms" // 41 attempts: none goes dead, so no number is skipped
	h := start(t, map[string]string{"SLUICE_RETRY_SCHEDULE": retries, "SLUICE_DELIVERY_TIMEOUT": "300ms"})
	h.process(app.Roles{Worker: true})
	rcv, err := fifocheck.Start(fifocheck.Mix{Fail: 0.15, Timeout: 0.05, Reset: 0.1})
	require.NoError(t, err)
	t.Cleanup(rcv.Close)
	endpoints := map[string]string{} // name → id
	for _, name := range []string{"a", "b"} {
		id, _ := h.fifoEndpoint(rcv.URL(name), 5)
		endpoints[name] = id
	}

	lines := []string{"k0", "k1", "k2", ""}
	const perLine = 25
	eventIDs := map[string][]string{} // line → event ids by post
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, line := range lines {
		wg.Go(func() {
			for n := range perLine {
				var headers []string
				if n%5 == 2 {
					headers = []string{"Idempotency-Key", fmt.Sprintf("fifo-%s-%d", line, n)}
				}
				id := h.postLine(line, n, headers...)
				mu.Lock()
				eventIDs[line] = append(eventIDs[line], id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// One batch, its events in the lines' order after the posts above.
	next := map[string]int{}
	var batch []map[string]any
	for i := range 40 {
		line := lines[i%3*(i%7)%len(lines)]
		n := perLine + next[line]
		next[line]++
		batch = append(batch, lineEvent(line, n))
	}
	var posted struct{ Data []struct{ ID string } }
	h.call(http.MethodPost, "/v1/events/batch", map[string]any{"events": batch}, http.StatusAccepted, &posted)
	for i, ev := range posted.Data {
		line := batch[i]["payload"].(map[string]any)["line"].(string)
		eventIDs[line] = append(eventIDs[line], ev.ID)
	}

	expected := map[[2]string][]fifocheck.Key{}
	total := 0
	for name := range endpoints {
		for _, line := range lines {
			for n := range eventIDs[line] {
				expected[[2]string{name, line}] = append(expected[[2]string{name, line}], fifocheck.Key{N: n})
				total++
			}
		}
	}
	delivered := func(rcs []fifocheck.Receipt) bool {
		ok := map[string]bool{}
		for _, rc := range rcs {
			if rc.Answer == fifocheck.OK {
				ok[rc.Endpoint+" "+rc.EventID] = true
			}
		}
		return len(ok) == total
	}
	require.True(t, rcv.Await(90*time.Second, delivered), "every event delivered to both endpoints")
	h.settle()
	receipts := rcv.Receipts()
	rep := fifocheck.Check(receipts, expected)
	t.Logf("%s", rep)
	require.Zero(t, rep.Failures(), "out of order: %v\noverlapping: %v\nsequence errors: %v\nmissing: %v",
		rep.OutOfOrder, rep.Overlaps, rep.SequenceErrors, rep.Missing)
	require.Positive(t, rep.Receipts-rep.Events, "the receivers failed some requests, which were sent again")

	// A replay goes to the back of its line, numbered next; an event posted
	// after the replay comes after it.
	last := int64(len(eventIDs["k0"]))
	var ds []delivery
	require.Eventually(t, func() bool {
		ds = h.deliveries("endpoint_id=" + endpoints["a"] + "&event_id=" + eventIDs["k0"][3])
		return len(ds) == 1 && ds[0].Status == "delivered"
	}, 10*time.Second, 20*time.Millisecond)
	h.call(http.MethodPost, "/v1/deliveries/"+ds[0].ID+"/replay", nil, http.StatusAccepted, nil)
	after := h.postLine("k0", len(eventIDs["k0"]))
	require.True(t, rcv.Await(30*time.Second, func(rcs []fifocheck.Receipt) bool {
		for _, rc := range rcs[len(receipts):] {
			if rc.Endpoint == "a" && rc.EventID == after && rc.Answer == fifocheck.OK {
				return true
			}
		}
		return false
	}), "the event posted after the replay is delivered")
	var replayOK time.Time
	for _, rc := range rcv.Receipts()[len(receipts):] {
		if rc.Endpoint != "a" || rc.Line != "k0" {
			continue
		}
		switch rc.EventID {
		case eventIDs["k0"][3]:
			require.Equal(t, last+1, rc.Sequence, "the replay is numbered next in its line")
			if rc.Answer == fifocheck.OK && replayOK.IsZero() {
				replayOK = rc.Ended
			}
		case after:
			require.Equal(t, last+2, rc.Sequence, "the event after the replay is numbered after it")
			require.False(t, replayOK.IsZero() || replayOK.After(rc.Arrived), "the replay was delivered before the next event was sent")
		default:
			t.Fatalf("unexpected request of line k0 after the replay: %+v", rc)
		}
	}
}

// TestFIFOEndpointAPI: ordering is shown, set at creation and changed by
// PATCH; a bad ordering or ordering_key is a 422; an event shows its key.
func TestFIFOEndpointAPI(t *testing.T) {
	h := start(t, nil)
	var ep struct{ ID, Ordering string }
	h.call(http.MethodPost, "/v1/endpoints", map[string]any{"url": "http://127.0.0.1:1/x"}, http.StatusCreated, &ep)
	require.Equal(t, "none", ep.Ordering)
	h.call(http.MethodPatch, "/v1/endpoints/"+ep.ID, map[string]any{"ordering": "fifo"}, http.StatusOK, &ep)
	require.Equal(t, "fifo", ep.Ordering)
	h.call(http.MethodPatch, "/v1/endpoints/"+ep.ID, map[string]any{"ordering": "lifo"}, http.StatusUnprocessableEntity, nil)
	h.call(http.MethodPatch, "/v1/endpoints/"+ep.ID, map[string]any{"ordering": nil}, http.StatusUnprocessableEntity, nil)

	for _, bad := range []string{"", strings.Repeat("é", 129), "a\x00b"} {
		h.call(http.MethodPost, "/v1/events", map[string]any{"type": "x.y", "payload": map[string]any{}, "ordering_key": bad},
			http.StatusUnprocessableEntity, nil)
	}
	key := strings.Repeat("é", 128)
	var ev struct {
		ID          string
		OrderingKey *string `json:"ordering_key"`
	}
	h.call(http.MethodPost, "/v1/events", map[string]any{"type": "x.y", "payload": map[string]any{}, "ordering_key": key}, http.StatusAccepted, &ev)
	require.Equal(t, key, *ev.OrderingKey)
	h.call(http.MethodGet, "/v1/events/"+ev.ID, nil, http.StatusOK, &ev)
	require.Equal(t, key, *ev.OrderingKey)
}

// fifoEndpoint creates a FIFO endpoint at url subscribed to fifo.*.
func (h *harness) fifoEndpoint(url string, maxInFlight int) (id, secret string) {
	h.t.Helper()
	var ep struct{ ID, Secret, Ordering string }
	h.call(http.MethodPost, "/v1/endpoints", map[string]any{"url": url, "ordering": "fifo", "max_in_flight": maxInFlight},
		http.StatusCreated, &ep)
	require.Equal(h.t, "fifo", ep.Ordering)
	h.call(http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": ep.ID, "event_types": []string{"fifo.*"}}, http.StatusCreated, nil)
	return ep.ID, ep.Secret
}

// lineEvent is post n of line (no ordering_key for "").
func lineEvent(line string, n int) map[string]any {
	ev := map[string]any{"type": "fifo.event", "payload": map[string]any{"line": line, "n": n, "a": 0}}
	if line != "" {
		ev["ordering_key"] = line
	}
	return ev
}

// postLine posts event n of line and returns its id.
func (h *harness) postLine(line string, n int, headers ...string) string {
	h.t.Helper()
	var ev struct{ ID string }
	h.call(http.MethodPost, "/v1/events", lineEvent(line, n), http.StatusAccepted, &ev, headers...)
	return ev.ID
}

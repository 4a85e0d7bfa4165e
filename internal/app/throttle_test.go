package app_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// endpointView is an endpoint's flow state as the API shows it.
type endpointView struct {
	Status           string     `json:"status"`
	ThrottledUntil   *time.Time `json:"throttled_until"`
	ThrottleReason   *string    `json:"throttle_reason"`
	QueuedDeliveries int        `json:"queued_deliveries"`
	Circuit          struct {
		State               string     `json:"state"`
		ConsecutiveFailures int        `json:"consecutive_failures"`
		NextProbeAt         *time.Time `json:"next_probe_at"`
	} `json:"circuit"`
}

func (h *harness) endpointState(id string) endpointView {
	h.t.Helper()
	var v endpointView
	h.call(http.MethodGet, "/v1/endpoints/"+id, nil, http.StatusOK, &v)
	return v
}

func TestThrottleWithRetryAfterPausesOnlyThatEndpoint(t *testing.T) {
	h := startTimed(t, map[string]string{"SLUICE_RETRY_SCHEDULE": "50ms"}, app.Roles{API: true, Worker: true}) // two attempts at most
	limited, healthy := receiver.New(t), receiver.New(t)
	limited.AnswerFunc(func(n int) receiver.Behavior {
		switch n {
		case 1:
			return receiver.Behavior{Status: 429, RetryAfter: "5"} // long enough to outlast the checks below on a loaded box
		case 2, 3:
			return receiver.Behavior{Status: 429} // no Retry-After: the throttle schedule
		default:
			return receiver.Behavior{}
		}
	})
	limitedID, _ := h.endpoint(limited, []string{"*"}, nil)
	h.endpoint(healthy, []string{"*"}, nil)

	// The first event throttles the limited endpoint; the other four come
	// while it is throttled.
	var until time.Time
	for i := range 5 {
		h.post("both.get.it", map[string]int{"x": 1})
		if i == 0 {
			eventually(t, 5*time.Second, func() bool { return h.endpointState(limitedID).Status == "throttled" }, "the 429 throttles")
			until = *h.endpointState(limitedID).ThrottledUntil
		}
	}
	eventually(t, 10*time.Second, func() bool { return healthy.Count() == 5 }, "healthy endpoint unaffected")
	// Both endpoints have their deliveries: whatever was not held would
	// have gone out beside the healthy endpoint's.
	require.Len(t, h.deliveries("endpoint_id="+limitedID), 5)
	// Held by the other endpoint's throttle, a delivery would go out once
	// it lifts, at throttled_until.
	for i, r := range healthy.Requests() {
		require.True(t, r.At.Before(until), "healthy delivery %d was not held by the throttle (%s, lifted at %s)", i, r.At, until)
	}

	v := h.endpointState(limitedID)
	require.True(t, time.Now().Before(until), "the checks below ran while the endpoint was throttled")
	require.Equal(t, "throttled", v.Status)
	require.NotNil(t, v.ThrottledUntil)
	require.Contains(t, *v.ThrottleReason, "429")
	require.Equal(t, 1, limited.Count(), "nothing is sent while throttled")
	require.Equal(t, "closed", v.Circuit.State, "429s never open the circuit")

	eventually(t, 15*time.Second, func() bool { return limited.Count() == 8 }, "all delivered after the throttle")
	reqs := limited.Requests()
	require.GreaterOrEqual(t, reqs[1].At.Sub(reqs[0].At), 4950*time.Millisecond, "Retry-After: 5 obeyed")
	require.GreaterOrEqual(t, reqs[2].At.Sub(reqs[1].At), 180*time.Millisecond, "then 200ms")
	require.GreaterOrEqual(t, reqs[3].At.Sub(reqs[2].At), 380*time.Millisecond, "then 400ms")

	eventually(t, 5*time.Second, func() bool {
		return len(h.deliveries("status=delivered&endpoint_id="+limitedID)) == 5
	}, "every delivery delivered, none dead despite three 429s and a budget of two attempts")
	require.Equal(t, "active", h.endpointState(limitedID).Status, "the throttle resets on success")
	var first delivery
	h.call(http.MethodGet, "/v1/deliveries/"+h.deliveries("endpoint_id=" + limitedID)[4].ID, nil, http.StatusOK, &first)
	require.Len(t, first.Attempts, 4, "three 429s and a success, all in the attempt log")
	require.Equal(t, 429, *first.Attempts[0].StatusCode)
}

package app_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// An endpoint's timeout_seconds and retry_schedule apply to its own
// attempts, over the server's defaults (here an hour between attempts and
// a 30-second timeout), and a PATCH applies to the next failure.
func TestDeliveryOptionsApplyPerEndpoint(t *testing.T) {
	h := start(t, map[string]string{"SLUICE_RETRY_SCHEDULE": "1h", "SLUICE_DELIVERY_TIMEOUT": "30s"})

	// Its own schedule: two short waits, three attempts, then dead.
	failing := receiver.New(t)
	failing.Answer(receiver.Behavior{Status: 500})
	quick, _ := h.endpoint(failing, []string{"quick.*"}, map[string]any{"retry_schedule": []string{"20ms", "40ms"}})
	// Its own timeout, and no retry: one attempt cut at a second.
	hanging := receiver.New(t)
	hanging.Answer(receiver.Behavior{Delay: time.Minute})
	slow, _ := h.endpoint(hanging, []string{"slow.*"}, map[string]any{"timeout_seconds": 1, "retry_schedule": []string{}})
	// The server's defaults: one failure, the next attempt an hour away.
	plain, _ := h.endpoint(failing, []string{"plain.*"}, nil)

	h.post("quick.one", map[string]int{"n": 1})
	h.post("slow.one", map[string]int{"n": 1})
	h.post("plain.one", map[string]int{"n": 1})

	eventually(t, 20*time.Second, func() bool { return len(h.deliveries("status=dead&endpoint_id="+quick)) == 1 }, "quick dead")
	d := h.deliveries("endpoint_id=" + quick)[0]
	require.Equal(t, 3, d.AttemptCount, "a schedule of two waits: three attempts")

	eventually(t, 20*time.Second, func() bool { return len(h.deliveries("status=dead&endpoint_id="+slow)) == 1 }, "slow dead")
	var got delivery
	h.call(http.MethodGet, "/v1/deliveries/"+h.deliveries("endpoint_id=" + slow)[0].ID, nil, http.StatusOK, &got)
	require.Len(t, got.Attempts, 1, "an empty schedule: one attempt")
	require.Contains(t, *got.Attempts[0].Error, "timeout")
	require.Less(t, *got.Attempts[0].LatencyMS, 10_000, "cut at its own second, not at the server's 30")

	eventually(t, 20*time.Second, func() bool { return len(h.deliveries("status=failed&endpoint_id="+plain)) == 1 }, "plain failed")
	require.Equal(t, 1, h.deliveries("endpoint_id=" + plain)[0].AttemptCount, "the server's schedule: the retry is an hour away")

	// A PATCH applies from the next failure on: the plain endpoint's
	// delivery, retried now by hand, fails under the new, empty schedule.
	h.call(http.MethodPatch, "/v1/endpoints/"+plain, map[string]any{"retry_schedule": []string{}}, http.StatusOK, nil)
	h.call(http.MethodPost, "/v1/deliveries/"+h.deliveries("endpoint_id=" + plain)[0].ID+"/retry", nil, http.StatusAccepted, nil)
	eventually(t, 20*time.Second, func() bool { return len(h.deliveries("status=dead&endpoint_id="+plain)) == 1 }, "plain dead")
}

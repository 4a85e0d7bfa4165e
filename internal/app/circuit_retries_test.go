package app_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// TestCircuitCountsRetriedDeliveriesAtTheThreshold is issue 43's report:
// eight events to a receiver that always answers 500, each retried twice,
// one after another. Every attempt counts as one failure whichever
// delivery it belongs to, so the circuit opens at the threshold's attempt
// and the other deliveries wait for its probe.
func TestCircuitCountsRetriedDeliveriesAtTheThreshold(t *testing.T) {
	h := startTimed(t, map[string]string{
		"SLUICE_CIRCUIT_THRESHOLD": "5",
		"SLUICE_CIRCUIT_PROBE":     "1m", // the default: no probe during the test
		"SLUICE_RETRY_SCHEDULE":    "100ms,150ms",
	}, app.Roles{API: true, Worker: true})
	rcv := receiver.New(t)
	rcv.Answer(receiver.Behavior{Status: 500})
	epID, _ := h.endpoint(rcv, []string{"*"}, map[string]any{"max_in_flight": 1})
	for i := range 8 {
		h.post("order.created", map[string]int{"i": i})
		// The next event once this one was tried, so that first attempts
		// and retries interleave as they did in the report.
		require.True(t, rcv.Await(10*time.Second, func(reqs []receiver.Request) bool { return len(reqs) > min(i, 4) }),
			"event %d attempted", i)
	}
	eventually(t, 10*time.Second, func() bool { return h.endpointState(epID).Circuit.State == "open" }, "circuit opens")
	v := h.endpointState(epID)
	require.Equal(t, 5, v.Circuit.ConsecutiveFailures, "opened at the threshold")
	require.Equal(t, 5, rcv.Count(), "nothing sent past the threshold before the probe")
	// Under load one delivery may spend its three attempts before four
	// others are tried: its retries ran out with the circuit closed at three
	// failures, as they should. A second dead one would take six failures,
	// past the threshold; the circuit holds the rest.
	eventually(t, 10*time.Second, func() bool { return len(h.deliveries("endpoint_id="+epID)) == 8 }, "eight deliveries")
	require.LessOrEqual(t, len(h.deliveries("status=dead&endpoint_id="+epID)), 1, "the circuit holds the deliveries")
}

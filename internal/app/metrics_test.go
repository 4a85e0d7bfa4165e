package app_test

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// scrape reads /metrics into a map from series (name and labels, as
// printed) to value.
func (h *harness) scrape() map[string]float64 {
	h.t.Helper()
	res, err := http.Get(h.srv.URL + "/metrics")
	require.NoError(h.t, err)
	defer res.Body.Close()
	require.Equal(h.t, http.StatusOK, res.StatusCode)
	body, err := io.ReadAll(res.Body)
	require.NoError(h.t, err)
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(h.t, err, line)
		out[line[:i]] = v
	}
	return out
}

// TestMetricsShowTheQueueMoving scrapes /metrics while one endpoint is
// throttled, one has an open circuit and one is healthy: the endpoint
// states, the due queue and its oldest age move as events arrive and time
// passes, and the API and lag series count what happened.
func TestMetricsShowTheQueueMoving(t *testing.T) {
	h := start(t, map[string]string{"SLUICE_CIRCUIT_THRESHOLD": "1", "SLUICE_CIRCUIT_PROBE": "1h"})
	throttled, broken, healthy := receiver.New(t), receiver.New(t), receiver.New(t)
	throttled.Answer(receiver.Behavior{Status: 429, RetryAfter: "3600"})
	broken.Answer(receiver.Behavior{Status: 500})
	for _, r := range []*receiver.Receiver{throttled, broken, healthy} {
		h.endpoint(r, []string{"*"}, nil)
	}
	before := h.scrape()
	require.Zero(t, before["sluice_deliveries_due"])
	require.Equal(t, 3.0, before[`sluice_endpoints{state="active"}`])

	for i := range 3 {
		h.post("m.tick", map[string]int{"i": i})
	}
	eventually(t, 10*time.Second, func() bool {
		m := h.scrape()
		return m[`sluice_endpoints{state="throttled"}`] == 1 && m[`sluice_endpoints{state="circuit_open"}`] == 1 &&
			m["sluice_deliveries_due"] == 6 && healthy.Count() == 3
	}, "one throttled, one open, 3 due on each of them")
	first := h.scrape()
	require.Equal(t, 1.0, first[`sluice_endpoints{state="active"}`])
	require.Greater(t, first["sluice_oldest_due_delivery_age_seconds"], 0.0)
	require.Equal(t, 1.0, first["sluice_queue_stats_up"])

	const oldest = "sluice_oldest_due_delivery_age_seconds"
	eventually(t, 10*time.Second, func() bool { return h.scrape()[oldest]-first[oldest] >= 1 }, "the oldest due delivery ages")
	h.post("m.tick", map[string]int{"i": 3})
	eventually(t, 10*time.Second, func() bool { return h.scrape()["sluice_deliveries_due"] == 8 }, "the queue grows")
	later := h.scrape()
	require.GreaterOrEqual(t, later[oldest]-first[oldest], 1.0, "the oldest due delivery ages")

	// Process-wide series (shared by the tests in this binary): present and counting.
	require.GreaterOrEqual(t, later[`sluice_api_requests_total{route="/v1/events",status="202"}`], 4.0)
	require.GreaterOrEqual(t, later["sluice_event_first_attempt_lag_seconds_count"], 4.0)
	require.GreaterOrEqual(t, later[`sluice_delivery_attempts_total{outcome="throttled"}`], 1.0)
	require.GreaterOrEqual(t, later[`sluice_circuit_transitions_total{kind="opened"}`], 1.0)
}

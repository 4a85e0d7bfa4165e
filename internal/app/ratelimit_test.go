package app_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/receiver"
)

// postBatch posts n events of one type in one request.
func (h *harness) postBatch(eventType string, n int) {
	h.t.Helper()
	events := make([]map[string]any, n)
	for i := range events {
		events[i] = map[string]any{"type": eventType, "payload": map[string]int{"i": i}}
	}
	h.call(http.MethodPost, "/v1/events/batch", map[string]any{"events": events}, http.StatusAccepted, nil)
}

// auditRate checks a receiver's arrival times against a rate limit: no
// one-second window holds more than burst + rate, and the achieved rate is
// within 95-110% of the limit.
func auditRate(t *testing.T, reqs []receiver.Request, perSecond float64, burst int) {
	t.Helper()
	maxWindow := 0
	for i := range reqs {
		j := i
		for j < len(reqs) && reqs[j].At.Sub(reqs[i].At) < time.Second {
			j++
		}
		maxWindow = max(maxWindow, j-i)
	}
	require.LessOrEqual(t, float64(maxWindow), float64(burst)+perSecond, "busiest one-second window")
	span := reqs[len(reqs)-1].At.Sub(reqs[0].At).Seconds()
	achieved := float64(len(reqs)-burst) / span // the first burst arrives at once
	t.Logf("busiest window %d, achieved %.2f/s of %.0f/s", maxWindow, achieved, perSecond)
	require.GreaterOrEqual(t, achieved, 0.95*perSecond)
	require.LessOrEqual(t, achieved, 1.10*perSecond)
}

func TestRateLimitAudit(t *testing.T) {
	h := start(t, nil)
	rcv := receiver.New(t)
	h.endpoint(rcv, []string{"*"}, map[string]any{"rate_limit": map[string]int{"per_second": 20, "burst": 5}})
	h.postBatch("audit.tick", 200)
	eventually(t, 30*time.Second, func() bool { return rcv.Count() == 200 }, "200 delivered, got %d", rcv.Count())
	auditRate(t, rcv.Requests(), 20, 5)
}

func TestRateLimitHoldsAcrossWorkerProcesses(t *testing.T) {
	h := startWith(t, nil, app.Roles{API: true})
	h.process(app.Roles{Worker: true})
	h.process(app.Roles{Worker: true})
	rcv := receiver.New(t)
	h.endpoint(rcv, []string{"*"}, map[string]any{"rate_limit": map[string]int{"per_second": 20, "burst": 5}})
	h.postBatch("audit.tick", 200)
	eventually(t, 30*time.Second, func() bool { return rcv.Count() == 200 }, "200 delivered, got %d", rcv.Count())
	auditRate(t, rcv.Requests(), 20, 5)
}

func TestPerMinuteRateSpreadsOut(t *testing.T) {
	h := start(t, nil)
	rcv := receiver.New(t)
	h.endpoint(rcv, []string{"*"}, map[string]any{"rate_limit": map[string]int{"per_minute": 120}}) // 2/s, burst 1
	h.postBatch("slow.tick", 6)
	eventually(t, 10*time.Second, func() bool { return rcv.Count() == 6 }, "6 delivered")
	reqs := rcv.Requests()
	require.GreaterOrEqual(t, reqs[5].At.Sub(reqs[0].At), 2250*time.Millisecond, "spread over the five half-second gaps")
	for i := range reqs {
		inWindow := 0
		for _, r := range reqs[i:] {
			if r.At.Sub(reqs[i].At) < time.Second {
				inWindow++
			}
		}
		require.LessOrEqual(t, inWindow, 3, "no second carries more than burst + rate")
	}
}

func TestRateLimitChangeTakesEffectWithinASecond(t *testing.T) {
	h := start(t, nil)
	rcv := receiver.New(t)
	epID, _ := h.endpoint(rcv, []string{"*"}, map[string]any{"rate_limit": map[string]int{"per_minute": 1}})
	h.postBatch("patch.tick", 50)
	eventually(t, 5*time.Second, func() bool { return rcv.Count() == 1 }, "the burst of one")
	h.call(http.MethodPatch, "/v1/endpoints/"+epID, map[string]any{"rate_limit": map[string]int{"per_second": 100}}, http.StatusOK, nil)
	patched := time.Now()
	eventually(t, 5*time.Second, func() bool { return rcv.Count() == 50 }, "the rest at the new rate")
	first := rcv.Requests()[1].At
	require.Less(t, first.Sub(patched), 1200*time.Millisecond, "the new rate applied within about a second")
}

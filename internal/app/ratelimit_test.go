package app_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/jobs/jobstest"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// auditRate checks an endpoint's rate limit. The bucket paces the requests
// Sluice starts, so the guarantee is checked on Sluice's own attempt log
// (each attempt's start): no one-second window holds more than burst +
// rate, and the achieved rate is within 80-110% of the limit. The lower
// bound catches a bucket that refills too slowly; how close Sluice comes
// to the rate is the benchmark's to hold (ratelimit-2w: at least 95%), as
// on a loaded box the workers can fall behind the bucket for a while. The
// receiver sees the same requests shifted by scheduling jitter on both
// sides of the loopback; Sluice allows 30 ms of it (flow.DeliveryPace),
// but beside the package's other tests it can reach hundreds of
// milliseconds, so the receiver's busiest window is logged here, not held
// to the bound (the benchmark's ratelimit-2w holds it there).
func auditRate(t *testing.T, h *harness, endpointID string, rcv *receiver.Receiver, perSecond float64, burst int) {
	t.Helper()
	sent := h.attemptTimes(endpointID)
	var arrived []time.Time
	for _, r := range rcv.Requests() {
		arrived = append(arrived, r.At)
	}
	sentMax, arrivedMax := busiestSecond(sent), busiestSecond(arrived)
	span := sent[len(sent)-1].Sub(sent[0]).Seconds()
	achieved := float64(len(sent)-burst) / span // the first burst goes at once
	t.Logf("busiest one-second window: %d sent, %d arrived (bound %d); achieved %.2f/s of %.0f/s",
		sentMax, arrivedMax, burst+int(perSecond), achieved, perSecond)
	require.LessOrEqual(t, float64(sentMax), float64(burst)+perSecond, "busiest one-second window of requests sent")
	require.GreaterOrEqual(t, achieved, 0.80*perSecond)
	require.LessOrEqual(t, achieved, 1.10*perSecond)
}

// busiestSecond is the most of the (sorted) times in any one-second window.
func busiestSecond(times []time.Time) int {
	most := 0
	for i := range times {
		j := i
		for j < len(times) && times[j].Sub(times[i]) < time.Second {
			j++
		}
		most = max(most, j-i)
	}
	return most
}

// attemptTimes is when Sluice started each attempt to the endpoint, from its
// attempt log, in order.
func (h *harness) attemptTimes(endpointID string) []time.Time {
	h.t.Helper()
	rows, err := h.proc.Pool.Query(context.Background(), `
		SELECT a.at FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id
		WHERE d.endpoint_id = $1 ORDER BY a.at`, endpointID)
	require.NoError(h.t, err)
	times, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	require.NoError(h.t, err)
	return times
}

func TestRateLimitAudit(t *testing.T) {
	h := startTimed(t, nil, app.Roles{API: true, Worker: true})
	rcv := receiver.New(t)
	epID, _ := h.endpoint(rcv, []string{"*"}, map[string]any{"rate_limit": map[string]int{"per_second": 20, "burst": 5}})
	h.postBatch("audit.tick", 200)
	eventually(t, 30*time.Second, func() bool { return rcv.Count() == 200 }, "200 delivered, got %d", rcv.Count())
	eventually(t, 5*time.Second, func() bool { return len(h.attemptTimes(epID)) == 200 }, "200 attempts recorded")
	auditRate(t, h, epID, rcv, 20, 5)
}

func TestRateLimitHoldsAcrossWorkerProcesses(t *testing.T) {
	h := startTimed(t, nil, app.Roles{API: true})
	h.process(app.Roles{Worker: true})
	h.process(app.Roles{Worker: true})
	rcv := receiver.New(t)
	epID, _ := h.endpoint(rcv, []string{"*"}, map[string]any{"rate_limit": map[string]int{"per_second": 20, "burst": 5}})
	h.postBatch("audit.tick", 200)
	eventually(t, 30*time.Second, func() bool { return rcv.Count() == 200 }, "200 delivered, got %d", rcv.Count())
	eventually(t, 5*time.Second, func() bool { return len(h.attemptTimes(epID)) == 200 }, "200 attempts recorded")
	auditRate(t, h, epID, rcv, 20, 5)
}

func TestPerMinuteRateSpreadsOut(t *testing.T) {
	h := startTimed(t, nil, app.Roles{API: true, Worker: true})
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
	h := startTimed(t, nil, app.Roles{API: true, Worker: true})
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

// TestSlowRateLimitParksToTheMoment: a rate too slow to sleep through (one
// delivery every 3 s) parks the endpoint until its next token, and the
// parked job runs when the token is due, not when River's scheduler next
// looks (up to 5 s later): the gaps stay at the rate.
func TestSlowRateLimitParksToTheMoment(t *testing.T) {
	h := startTimed(t, nil, app.Roles{API: true, Worker: true})
	rcv := receiver.New(t)
	epID, _ := h.endpoint(rcv, []string{"*"}, map[string]any{"rate_limit": map[string]int{"per_minute": 20, "burst": 1}})
	h.postBatch("slow.park", 3)
	eventually(t, 15*time.Second, func() bool { return rcv.Count() == 3 }, "3 delivered")
	reqs := rcv.Requests()
	for i := 1; i < 3; i++ {
		gap := reqs[i].At.Sub(reqs[i-1].At)
		require.GreaterOrEqual(t, gap, 2900*time.Millisecond, "gap %d: never faster than the rate", i)
		require.Less(t, gap, 4500*time.Millisecond, "gap %d: the parked job runs when its token is due", i)
	}
	parked := len(jobstest.InState(jobstest.Dispatch(t, h.proc.Store.Pool(), epID), "completed"))
	require.GreaterOrEqual(t, parked, 2, "each wait ended its run: the endpoint was parked, not polled")
}

package app_test

import (
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// TestSigtermDrainsWithoutLoss stops a worker process with SIGTERM during
// a burst, as an orchestrator would: it exits cleanly within seconds, its
// endpoints go on in the other worker, and every event arrives exactly once
// (its requests in flight finished and were recorded, none was cut and
// sent again). An API process stopped the same way answers /readyz with
// 503 while it drains, then exits cleanly.
func TestSigtermDrainsWithoutLoss(t *testing.T) {
	h := startWith(t, nil, app.Roles{API: true})
	h.process(app.Roles{Worker: true})
	rcvs := []*receiver.Receiver{receiver.New(t), receiver.New(t)}
	for _, r := range rcvs {
		r.Answer(receiver.Behavior{Delay: 20 * time.Millisecond})
		h.endpoint(r, []string{"stop.*"}, map[string]any{"max_in_flight": 5})
	}
	worker := h.startChild()
	addr := freeAddr(t)
	api := h.startChildWith("api", map[string]string{"SLUICE_ADDR": addr, "SLUICE_DRAIN_DELAY": "1s"})
	eventually(t, 30*time.Second, func() bool { return readyz(addr) == http.StatusOK }, "the API process is ready")

	const batches, perBatch = 6, 100
	for range batches {
		h.postBatch("stop.burst", perBatch)
	}
	eventually(t, 30*time.Second, func() bool { return rcvs[0].Count() >= 50 }, "burst under way")

	stopped := time.Now()
	require.NoError(t, worker.Process.Signal(syscall.SIGTERM))
	require.NoError(t, worker.Wait(), "the worker exits cleanly")
	t.Logf("worker stopped %s after SIGTERM", time.Since(stopped).Round(time.Millisecond))
	require.Less(t, time.Since(stopped), 15*time.Second, "within its deadline")

	require.NoError(t, api.Process.Signal(syscall.SIGTERM))
	eventually(t, 5*time.Second, func() bool { return readyz(addr) == http.StatusServiceUnavailable }, "/readyz answers 503 while draining")
	require.NoError(t, api.Wait(), "the API process exits cleanly")

	for i, r := range rcvs {
		eventually(t, 60*time.Second, func() bool { return unique(r) == batches*perBatch },
			"receiver %d has %d/%d", i, unique(r), batches*perBatch)
	}
	h.settle() // a request sent again would have arrived by now
	for i, r := range rcvs {
		require.Equal(t, batches*perBatch, r.Count(), "receiver %d: no request was cut and sent again", i)
	}
}

// freeAddr is a loopback address nothing listens on (yet).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// readyz is the status of GET /readyz at addr, 0 if nothing answers.
func readyz(addr string) int {
	c := http.Client{Timeout: time.Second}
	res, err := c.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

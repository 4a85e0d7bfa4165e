package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/receiver"
)

// childWorkerEnv makes the test binary run as a worker-only Sluice process
// (see TestMain), so a test can kill it with SIGKILL.
const childWorkerEnv = "SLUICE_TEST_CHILD_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(childWorkerEnv) != "" {
		runChildWorker()
		return
	}
	os.Exit(m.Run())
}

func runChildWorker() {
	cfg, err := config.FromEnv(true)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := app.Serve(context.Background(), cfg, app.Roles{Worker: true}, logger); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// startChild runs a worker process on the harness's database.
func (h *harness) startChild() *exec.Cmd {
	h.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childWorkerEnv+"=1")
	for k, v := range h.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = os.Stderr
	require.NoError(h.t, cmd.Start())
	h.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// TestWorkerKilledMidBurstLosesNothing kills a worker process with SIGKILL
// while it is sending a burst and starts another: every event still
// arrives, and each endpoint is served again within seconds (its dead run's
// lease is freed by Postgres when the process's connection dies, and the
// sweeper replaces the job at once), not after River's rescuer.
func TestWorkerKilledMidBurstLosesNothing(t *testing.T) {
	h := startWith(t, map[string]string{"SLUICE_DELIVERY_TIMEOUT": "1s"}, app.Roles{API: true})
	rcvs := []*receiver.Receiver{receiver.New(t), receiver.New(t)}
	for _, r := range rcvs {
		r.Answer(receiver.Behavior{Delay: 20 * time.Millisecond})
		h.endpoint(r, []string{"crash.*"}, map[string]any{"max_in_flight": 5})
	}
	first := h.startChild()

	const batches, perBatch = 6, 100
	for b := range batches {
		events := make([]map[string]any, perBatch)
		for i := range events {
			events[i] = map[string]any{"type": "crash.burst", "payload": map[string]int{"b": b, "i": i}}
		}
		h.call(http.MethodPost, "/v1/events/batch", map[string]any{"events": events}, http.StatusAccepted, nil)
	}
	eventually(t, 30*time.Second, func() bool { return rcvs[0].Count() >= 50 && rcvs[1].Count() >= 50 }, "burst under way")
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_, _ = first.Process.Wait()
	killed := time.Now()
	killedAt := rcvs[0].Count() + rcvs[1].Count()
	require.Less(t, killedAt, 2*batches*perBatch, "killed mid-burst")

	h.startChild()
	for i, r := range rcvs {
		eventually(t, 60*time.Second, func() bool { return unique(r) == batches*perBatch },
			"receiver %d has %d/%d after the crash", i, unique(r), batches*perBatch)
		resumed := firstAfter(r, killed).Sub(killed)
		t.Logf("receiver %d: served again %s after the kill", i, resumed.Round(time.Millisecond))
		require.Less(t, resumed, 10*time.Second, "receiver %d waited for a rescuer", i)
	}
	t.Logf("killed after %d receipts; %d receipts in all (duplicates are attempts in flight at the kill)",
		killedAt, rcvs[0].Count()+rcvs[1].Count())
}

// firstAfter is when r received its first request after t.
func firstAfter(r *receiver.Receiver, t time.Time) time.Time {
	for _, req := range r.Requests() {
		if req.At.After(t) {
			return req.At
		}
	}
	return time.Time{}
}

package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// childWorkerEnv makes the test binary run as a Sluice process (see
// TestMain) with the roles it names ("worker" or "api"), so a test can kill
// it with SIGKILL or stop it with SIGTERM as an operator would.
const childWorkerEnv = "SLUICE_TEST_CHILD_ROLES"

func TestMain(m *testing.M) {
	if roles := os.Getenv(childWorkerEnv); roles != "" {
		runChild(roles)
		return
	}
	os.Exit(m.Run())
}

// runChild serves the roles until SIGTERM, like `sluice serve`.
func runChild(roles string) {
	if roles == stampedRoles {
		runStampedAPI()
		return
	}
	cfg, err := config.FromEnv(true)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := app.Roles{Worker: roles == "worker", API: roles == "api"}
	if err := app.Serve(ctx, cfg, r, logger); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// startChild runs a worker process on the harness's database.
func (h *harness) startChild() *exec.Cmd {
	h.t.Helper()
	return h.startChildWith("worker", nil)
}

// startChildWith runs a process with the roles on the harness's database,
// with extra settings.
func (h *harness) startChildWith(roles string, env map[string]string) *exec.Cmd {
	h.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childWorkerEnv+"="+roles)
	for k, v := range h.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	for k, v := range env {
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
	for range batches {
		h.postBatch("crash.burst", perBatch)
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

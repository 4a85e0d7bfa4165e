package dispatch

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestWakeCrossesProcesses: nudging an endpoint whose job is already live
// wakes its run registered with another process's Nudger (here: another
// Nudger, listening on its own connection), also after that listener's
// connection was cut; a nudge that queues a new job wakes nobody.
func TestWakeCrossesProcesses(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx := t.Context()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	ep, err := f.Store.CreateEndpoint(ctx, f.TenantA.ID, sluice.EndpointSettings{URL: "https://example.com/h", MaxInFlight: 1}, storetest.Secret)
	require.NoError(t, err)
	marker, err := f.Store.CreateEndpoint(ctx, f.TenantA.ID, sluice.EndpointSettings{URL: "https://example.com/m", MaxInFlight: 1}, storetest.Secret)
	require.NoError(t, err)

	// The Nudger of a process where the endpoint's run lingers.
	other := NewNudger(f.Store, f.Jobs, NudgerConfig{MaxLinger: 10, ConnConfig: f.Store.Pool().Config().ConnConfig, Logger: logger})
	wakes, markerWakes := other.join(ep.ID), other.join(marker.ID)
	require.NoError(t, other.Start(ctx))
	t.Cleanup(other.Stop)
	listener := func() (pid int) { // the listening backend, 0 while there is none
		// Idle: its LISTEN has completed, so it hears what commits after.
		_ = f.Store.Pool().QueryRow(ctx, `SELECT pid FROM pg_stat_activity
			WHERE query LIKE 'LISTEN%' AND datname = current_database() AND state = 'idle'`).Scan(&pid)
		return pid
	}
	require.Eventually(t, func() bool { return listener() != 0 }, 10*time.Second, 10*time.Millisecond)

	here := NewNudger(f.Store, f.Jobs, NudgerConfig{Logger: logger})                     // this process: no runs
	nudge := func(id uuid.UUID) { require.NoError(t, here.Nudge(ctx, []uuid.UUID{id})) } // what fan-out does after its commit
	awaitWake := func(r *registration, what string) {
		t.Helper()
		select {
		case <-r.wakes:
		case <-time.After(10 * time.Second):
			t.Fatal(what)
		}
	}

	nudge(ep.ID)     // a new job: nothing live to wake
	nudge(marker.ID) // likewise
	nudge(marker.ID) // the marker's job is live: its run is woken, after anything sent before
	awaitWake(markerWakes, "no wake crossed to the other process")
	require.Empty(t, wakes.wakes, "a nudge that queued a new job woke a run")

	nudge(ep.ID) // the job is live: its run, wherever it is, is woken
	awaitWake(wakes, "no wake crossed to the other process")

	// Cut the listener's connection: it comes back and wakes again.
	old := listener()
	_, err = f.Store.Pool().Exec(ctx, `SELECT pg_terminate_backend($1)`, old)
	require.NoError(t, err)
	require.Eventually(t, func() bool { pid := listener(); return pid != 0 && pid != old }, 10*time.Second, 20*time.Millisecond)
	nudge(ep.ID)
	awaitWake(wakes, "no wake after the listener reconnected")
}

func TestParseWake(t *testing.T) {
	t.Parallel()
	a, b := "0193c1b2-0000-7000-8000-000000000001", "0193c1b2-0000-7000-8000-000000000002"
	ids := parseWake(a + ",junk,," + b)
	require.Len(t, ids, 2)
	require.Equal(t, a, ids[0].String())
	require.Equal(t, b, ids[1].String())
}

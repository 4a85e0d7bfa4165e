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

// TestWakeCrossesProcesses: waking the dispatcher of an endpoint whose job
// is already live signals that endpoint's run registered in another
// process's Waker (here: another Waker on its own connection), also after
// that Waker's connection was cut; queueing a new job signals nobody.
func TestWakeCrossesProcesses(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx := t.Context()
	ep, _, err := f.Store.CreateEndpoint(ctx, f.TenantA.ID, sluice.EndpointSettings{URL: "https://example.com/h", MaxInFlight: 1})
	require.NoError(t, err)
	marker, _, err := f.Store.CreateEndpoint(ctx, f.TenantA.ID, sluice.EndpointSettings{URL: "https://example.com/m", MaxInFlight: 1})
	require.NoError(t, err)

	other := NewWaker(10) // the Waker of a process where the endpoint's run lingers
	wake := other.join(ep.ID)
	markerWake := other.join(marker.ID)
	go other.Listen(ctx, f.Store.Pool().Config().ConnConfig, slog.New(slog.NewTextHandler(io.Discard, nil)))
	listener := func() (pid int) { // the listening backend, 0 while there is none
		_ = f.Store.Pool().QueryRow(ctx, `SELECT pid FROM pg_stat_activity
			WHERE query LIKE 'LISTEN%' AND datname = current_database() AND state <> 'disabled'`).Scan(&pid)
		return pid
	}
	require.Eventually(t, func() bool { return listener() != 0 }, 10*time.Second, 10*time.Millisecond)

	dispatchTo := func(id uuid.UUID) { // what fan-out does after its commit
		require.NoError(t, f.Store.DispatchOrWake(ctx, []uuid.UUID{id}, f.Jobs))
	}
	dispatch := func() { dispatchTo(ep.ID) }
	dispatch() // a new job: nothing live to wake
	// The marker endpoint's second dispatch wakes its run; notifications
	// arrive in commit order, so one from the first dispatch would have
	// arrived before it.
	dispatchTo(marker.ID)
	dispatchTo(marker.ID)
	select {
	case <-markerWake.ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up crossed to the other process")
	}
	select {
	case <-wake.ch:
		t.Fatal("a new dispatch job woke a run")
	default:
	}
	dispatch() // the job is live: its run, wherever it is, is told
	select {
	case <-wake.ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up crossed to the other process")
	}

	// Cut the listener's connection: it comes back and wakes again.
	old := listener()
	_, err = f.Store.Pool().Exec(ctx, `SELECT pg_terminate_backend($1)`, old)
	require.NoError(t, err)
	require.Eventually(t, func() bool { pid := listener(); return pid != 0 && pid != old }, 10*time.Second, 20*time.Millisecond)
	dispatch()
	select {
	case <-wake.ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up after the listener reconnected")
	}
}

func TestParseWake(t *testing.T) {
	t.Parallel()
	a, b := "0193c1b2-0000-7000-8000-000000000001", "0193c1b2-0000-7000-8000-000000000002"
	ids := parseWake(a + ",junk,," + b)
	require.Len(t, ids, 2)
	require.Equal(t, a, ids[0].String())
	require.Equal(t, b, ids[1].String())
}

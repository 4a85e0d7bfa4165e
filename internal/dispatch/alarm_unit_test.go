package dispatch

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testkit/fakeclock"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestUnitAlarmRingsWhenWaitsEnd parks four endpoints, two of them until
// the same moment: the alarm waits for the earliest end and asks for both
// in one call; a wait ending 10 ms later is asked for alarmEvery after
// that ring, not at once; then the last.
func TestUnitAlarmRingsWhenWaitsEnd(t *testing.T) {
	start := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	clk := fakeclock.New(start)
	asked := make(chan []uuid.UUID, 4)
	ask := func(_ context.Context, ids []uuid.UUID) error { asked <- ids; return nil }
	a := newAlarm(clk, slog.Default())
	ctx, stop := context.WithCancel(t.Context())
	rang := make(chan struct{})
	go func() { defer close(rang); a.run(ctx) }()
	defer func() { stop(); <-rang }()
	a1, a2, near, b := uuid.New(), uuid.New(), uuid.New(), uuid.New()

	a.set(b, start.Add(5*time.Second), ask)
	a.set(near, start.Add(2*time.Second+10*time.Millisecond), ask)
	a.set(a1, start.Add(2*time.Second), ask)
	a.set(a2, start.Add(2*time.Second), ask)
	for d := range clk.Waits { // until the alarm waits for the earliest end
		if d == 2*time.Second+alarmLate {
			break
		}
	}
	select {
	case ids := <-asked:
		t.Fatalf("asked for %v before any wait ended", ids)
	default:
	}
	clk.Advance(2*time.Second + alarmLate)
	require.ElementsMatch(t, []uuid.UUID{a1, a2}, <-asked, "both, in one call")
	for d := range clk.Waits { // the next ring waits out alarmEvery
		if d == alarmEvery {
			break
		}
	}
	clk.Advance(alarmEvery - time.Millisecond)
	select {
	case ids := <-asked:
		t.Fatalf("asked for %v within alarmEvery of the last ring", ids)
	default:
	}
	clk.Advance(time.Millisecond)
	require.Equal(t, []uuid.UUID{near}, <-asked)
	clk.Advance(3 * time.Second)
	require.Equal(t, []uuid.UUID{b}, <-asked)
}

package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testkit/fakeclock"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestUnitNudgerSignalsRegisteredRuns: a wake reaches the run registered
// for its endpoint, and the endpoints without one are returned, for a job
// or a notification; one run registers per endpoint, and a run that left
// is woken no more.
func TestUnitNudgerSignalsRegisteredRuns(t *testing.T) {
	t.Parallel()
	n := NewNudger(nil, nil, NudgerConfig{MaxLinger: 1})
	a, b := uuid.New(), uuid.New()
	require.Equal(t, []uuid.UUID{a, b}, n.signal([]uuid.UUID{a, b}), "no runs: both need a job")

	wakes := n.join(a)
	require.NotNil(t, wakes)
	require.Nil(t, n.join(a), "one registered run per endpoint")
	require.Equal(t, []uuid.UUID{b}, n.signal([]uuid.UUID{a, b}), "a's run takes the wake, b needs a job")
	require.Len(t, wakes.wakes, 1)
	require.Equal(t, []uuid.UUID{b}, n.signal([]uuid.UUID{a, b}), "woken twice: one wake held")
	require.Len(t, wakes.wakes, 1)

	n.leave(a, wakes)
	n.leave(a, wakes)
	require.Equal(t, []uuid.UUID{a}, n.signal([]uuid.UUID{a}), "a run that left needs a job")

	off := NewNudger(nil, nil, NudgerConfig{})
	require.Nil(t, off.join(a), "MaxLinger 0: runs do not register")
	clk := fakeclock.New(clock)
	require.False(t, answersAtOnce(t, clk, func(ctx context.Context) bool {
		return off.linger(ctx, clk, nil, clock.Add(time.Minute))
	}))
}

// TestUnitNudgerBoundsLingering: at most MaxLinger runs linger at once;
// another run with nothing due does not wait.
func TestUnitNudgerBoundsLingering(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New(clock)
	n := NewNudger(nil, nil, NudgerConfig{MaxLinger: 1, Clock: clk})
	a, b := uuid.New(), uuid.New()
	wakesA, wakesB := n.join(a), n.join(b)
	woken := waiting(t, clk, lingerFor, func() bool { return n.linger(t.Context(), clk, wakesA, clock.Add(time.Minute)) })
	require.False(t, answersAtOnce(t, clk, func(ctx context.Context) bool {
		return n.linger(ctx, clk, wakesB, clock.Add(time.Minute))
	}), "at the linger limit: b does not wait")
	require.Empty(t, n.signal([]uuid.UUID{a}))
	require.True(t, <-woken)
	require.Zero(t, lingering(n), "no longer counted as lingering")
}

// TestUnitNudgerStopEndsLingering: lingering shares the Nudger's
// lifecycle: stopping it ends a linger at once, unwoken.
func TestUnitNudgerStopEndsLingering(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New(clock)
	n := NewNudger(nil, nil, NudgerConfig{MaxLinger: 1, Clock: clk})
	require.NoError(t, n.Start(t.Context()))
	wakes := n.join(uuid.New())
	woken := waiting(t, clk, lingerFor, func() bool { return n.linger(t.Context(), clk, wakes, clock.Add(time.Minute)) })
	n.Stop()
	require.False(t, <-woken)
	require.Zero(t, clk.Pending(), "its timer is stopped")
}

// lingering is how many runs n counts as lingering.
func lingering(n *Nudger) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lingering
}

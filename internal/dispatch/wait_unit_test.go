package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testkit/fakeclock"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/jobs"
)

// The unit tests of how long a dispatch run waits, on a fake clock that
// moves only when the test advances it. The fake's now is in 2030, so code
// that read the system's time instead would decide differently.

func TestUnitRunDeadline(t *testing.T) {
	t.Parallel()
	w := &Worker{cfg: Config{Budget: 10 * time.Second, Clock: fakeclock.New(clock)}}
	lo, hi := clock.Add(time.Hour), clock
	for range 1000 {
		d := w.deadline()
		lo, hi = minTime(lo, d), maxTime(hi, d)
	}
	require.False(t, lo.Before(clock.Add(8*time.Second)), "at most a fifth short of the budget from the clock's now: %s", lo)
	require.False(t, hi.After(clock.Add(12*time.Second)), "at most a fifth over: %s", hi)
	require.Less(t, hi.Sub(lo), 4*time.Second)
	require.Greater(t, hi.Sub(lo), 2*time.Second, "spread, so runs started together yield apart")
}

// TestUnitNextRetry: a failed run's job is retried soon after the clock's
// now (the first retry 100ms, give or take a fifth).
func TestUnitNextRetry(t *testing.T) {
	t.Parallel()
	w := &Worker{cfg: Config{Clock: fakeclock.New(clock)}}
	at := w.NextRetry(&river.Job[jobs.DispatchArgs]{JobRow: &rivertype.JobRow{Attempt: 1}})
	require.False(t, at.Before(clock.Add(80*time.Millisecond)), "%s", at)
	require.False(t, at.After(clock.Add(120*time.Millisecond)), "%s", at)
}

func TestUnitSleepIfSoon(t *testing.T) {
	t.Parallel()
	far := clock.Add(time.Minute)

	t.Run("due soon: sleeps it out on the clock", func(t *testing.T) {
		t.Parallel()
		clk := fakeclock.New(clock)
		slept := waiting(t, clk, 300*time.Millisecond, func() bool {
			return sleepIfSoon(t.Context(), clk, 300*time.Millisecond, far)
		})
		clk.Advance(299 * time.Millisecond)
		require.Equal(t, 1, clk.Pending(), "still waiting a millisecond early")
		clk.Advance(time.Millisecond)
		require.True(t, <-slept)
	})
	t.Run("soon is at most a second", func(t *testing.T) {
		t.Parallel()
		clk := fakeclock.New(clock)
		slept := waiting(t, clk, soon, func() bool { return sleepIfSoon(t.Context(), clk, soon, far) })
		clk.Advance(soon)
		require.True(t, <-slept)
		require.False(t, answersAtOnce(t, clk, func(ctx context.Context) bool {
			return sleepIfSoon(ctx, clk, soon+time.Millisecond, far)
		}), "longer: the run parks or ends instead")
	})
	t.Run("due now: goes on without waiting", func(t *testing.T) {
		t.Parallel()
		clk := fakeclock.New(clock)
		require.True(t, answersAtOnce(t, clk, func(ctx context.Context) bool { return sleepIfSoon(ctx, clk, 0, far) }))
		require.True(t, answersAtOnce(t, clk, func(ctx context.Context) bool { return sleepIfSoon(ctx, clk, -time.Second, far) }))
	})
	t.Run("gives up when the wait ends past the deadline", func(t *testing.T) {
		t.Parallel()
		clk := fakeclock.New(clock)
		deadline := clock.Add(500 * time.Millisecond)
		require.False(t, answersAtOnce(t, clk, func(ctx context.Context) bool {
			return sleepIfSoon(ctx, clk, 501*time.Millisecond, deadline)
		}))
		slept := waiting(t, clk, 500*time.Millisecond, func() bool {
			return sleepIfSoon(t.Context(), clk, 500*time.Millisecond, deadline)
		})
		clk.Advance(500 * time.Millisecond)
		require.True(t, <-slept, "ending at the deadline is within it")

		require.False(t, answersAtOnce(t, clk, func(ctx context.Context) bool {
			return sleepIfSoon(ctx, clk, time.Millisecond, deadline)
		}), "the clock has reached the deadline: nothing more fits")
		require.False(t, answersAtOnce(t, clk, func(ctx context.Context) bool {
			return sleepIfSoon(ctx, clk, 0, deadline.Add(-time.Second))
		}), "past the deadline: not even a wait of nothing")
	})
	t.Run("stopping ends the sleep", func(t *testing.T) {
		t.Parallel()
		clk := fakeclock.New(clock)
		ctx, cancel := context.WithCancel(t.Context())
		slept := waiting(t, clk, 300*time.Millisecond, func() bool {
			return sleepIfSoon(ctx, clk, 300*time.Millisecond, far)
		})
		cancel()
		require.False(t, <-slept)
		require.Zero(t, clk.Pending(), "its timer is stopped")
	})
}

func TestUnitLinger(t *testing.T) {
	t.Parallel()

	t.Run("lingerFor when the deadline is further", func(t *testing.T) {
		t.Parallel()
		clk, w, id := fakeclock.New(clock), NewNudger(nil, nil, NudgerConfig{MaxLinger: 1}), uuid.New()
		ch := w.join(id)
		woken := waiting(t, clk, lingerFor, func() bool { return w.linger(t.Context(), clk, ch, clock.Add(time.Minute)) })
		clk.Advance(lingerFor - time.Millisecond)
		require.Equal(t, 1, clk.Pending(), "still lingering")
		clk.Advance(time.Millisecond)
		require.False(t, <-woken, "nobody woke it")
		require.Zero(t, lingering(w), "no longer counted as lingering")
	})
	t.Run("bounded by the deadline", func(t *testing.T) {
		t.Parallel()
		clk, w, id := fakeclock.New(clock), NewNudger(nil, nil, NudgerConfig{MaxLinger: 1}), uuid.New()
		ch := w.join(id)
		woken := waiting(t, clk, 300*time.Millisecond, func() bool {
			return w.linger(t.Context(), clk, ch, clock.Add(300*time.Millisecond))
		})
		require.Empty(t, w.signal([]uuid.UUID{id}), "the lingering run takes the wake")
		require.True(t, <-woken)
		require.Zero(t, clk.Pending(), "its timer is stopped")
	})
	t.Run("deadline reached: no linger", func(t *testing.T) {
		t.Parallel()
		clk, w, id := fakeclock.New(clock), NewNudger(nil, nil, NudgerConfig{MaxLinger: 1}), uuid.New()
		ch := w.join(id)
		clk.Advance(time.Second)
		require.False(t, answersAtOnce(t, clk, func(ctx context.Context) bool {
			return w.linger(ctx, clk, ch, clock.Add(time.Second))
		}))
	})
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

package ratelimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// TestNoWindowExceedsBurstPlusRate drives a greedy consumer against the
// bucket on a simulated clock and checks every one-second window.
func TestNoWindowExceedsBurstPlusRate(t *testing.T) {
	t.Parallel()
	for _, rl := range []sluice.RateLimit{
		{PerSecond: 20, Burst: 5},
		{PerSecond: 3, Burst: 10},
		{PerMinute: 30, Burst: 1},
	} {
		start := time.Unix(1_700_000_000, 0)
		now, b := start, Bucket{}
		var sent []time.Time
		for now.Sub(start) < 2*time.Minute {
			b = b.Refill(rl, now)
			n := b.Available()
			b = b.Take(n)
			for range n {
				sent = append(sent, now)
			}
			now = now.Add(max(b.Wait(rl), time.Millisecond))
		}
		limit := float64(rl.Burst) + rl.TokensPerSecond()
		for i := range sent {
			j := i
			for j < len(sent) && sent[j].Sub(sent[i]) < time.Second {
				j++
			}
			require.LessOrEqual(t, float64(j-i), limit, "%+v: window at %s", rl, sent[i].Sub(start))
		}
		achieved := float64(len(sent)) / 120
		require.GreaterOrEqual(t, achieved, 0.95*rl.TokensPerSecond(), "%+v", rl)
	}
}

func TestRefill(t *testing.T) {
	t.Parallel()
	rl := sluice.RateLimit{PerMinute: 60, Burst: 2}
	now := time.Unix(100, 0)
	b := Bucket{}.Refill(rl, now)
	require.Equal(t, 2, b.Available(), "a new bucket starts full")
	b = b.Take(2)
	require.Equal(t, time.Second, b.Wait(rl))
	b = b.Refill(rl, now.Add(1500*time.Millisecond))
	require.Equal(t, 1, b.Available())
	b = b.Refill(rl, now.Add(time.Hour))
	require.Equal(t, 2, b.Available(), "capped at burst")
	require.Equal(t, 2, b.Refill(rl, now).Available(), "a clock going back adds nothing")
}

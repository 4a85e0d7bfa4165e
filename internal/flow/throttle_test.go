package flow

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNext(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	schedule := []time.Duration{time.Minute, 5 * time.Minute}

	s := NextThrottle(Throttle{}, 7*time.Second, schedule, now)
	require.Equal(t, now.Add(7*time.Second), s.Until)
	require.Equal(t, 1, s.Count)
	require.Contains(t, s.Reason, "Retry-After")
	require.True(t, s.Active(now.Add(6*time.Second)))
	require.False(t, s.Active(now.Add(7*time.Second)))

	s = NextThrottle(s, 0, schedule, now)
	require.Equal(t, now.Add(5*time.Minute), s.Until, "second 429 in a row: second step")
	s = NextThrottle(s, 0, schedule, now)
	require.Equal(t, now.Add(5*time.Minute), s.Until, "the last step repeats")
	require.Equal(t, 3, s.Count)

	s = NextThrottle(Throttle{}, 72*time.Hour, schedule, now)
	require.Equal(t, now.Add(MaxRetryAfter), s.Until, "Retry-After is capped")
}

package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// paced returns n arrivals: burst at start, then one every 1/rate seconds.
func paced(start time.Time, burst, rate, n int) []time.Time {
	var at []time.Time
	for i := range n {
		t := start
		if i >= burst {
			t = start.Add(time.Duration(i-burst+1) * time.Second / time.Duration(rate))
		}
		at = append(at, t)
	}
	return at
}

func TestCheckRatePacedBucket(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	// burst 10 at start, then 10/s for 10 s: the window starting at the
	// burst holds the burst plus the next 9 (the 10th is at exactly +1s).
	c := checkRate(paced(start, 10, 10, 110), 10)
	require.Equal(t, 19, c.MaxWindow)
	require.Equal(t, start, c.WindowAt)
	require.InDelta(t, 10, c.Achieved(2*time.Second), 0.2)
	require.Equal(t, 10, c.SteadyMaxWindow)
}

func TestCheckRateCountsAnyWindowStart(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	at := paced(start, 1, 10, 50)
	// A burst of 15 at 2.5 s: the first window holding it and 10 paced
	// arrivals starts at 1.6 s, not at a whole second.
	for range 15 {
		at = append(at, start.Add(2500*time.Millisecond))
	}
	c := checkRate(at, 10)
	require.Equal(t, 15+10, c.MaxWindow)
	require.Equal(t, start.Add(1600*time.Millisecond), c.WindowAt)
	require.Equal(t, 25, c.SteadyMaxWindow) // the burst lies in the steady part
}

func TestCheckRateTooShortForSteady(t *testing.T) {
	t.Parallel()
	c := checkRate(paced(time.Unix(1000, 0), 5, 10, 12), 10)
	require.Zero(t, c.Achieved(2*time.Second))
}

package flow

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

func TestBreakerLifecycle(t *testing.T) {
	t.Parallel()
	cfg := CircuitConfig{Threshold: 3, FirstProbe: time.Minute, MaxProbe: DefaultMaxProbe}
	now := time.Unix(1000, 0)
	b := Breaker{State: sluice.CircuitClosed}

	var tr Transition
	for i := range 2 {
		b, tr = b.Record(false, "status 500", now, cfg)
		require.Equal(t, NoTransition, tr, "failure %d", i+1)
	}
	b, tr = b.Record(true, "", now, cfg)
	require.Equal(t, NoTransition, tr)
	require.Zero(t, b.Failures, "success resets the count")

	for range 2 {
		b, _ = b.Record(false, "status 500", now, cfg)
	}
	b, tr = b.Record(false, "timeout", now, cfg)
	require.Equal(t, CircuitOpened, tr)
	require.Equal(t, sluice.CircuitOpen, b.State)
	require.Equal(t, "timeout", b.LastError)
	require.Equal(t, now.Add(time.Minute), *b.NextProbeAt)
	b, tr = b.Record(false, "status 500", now, cfg)
	require.Equal(t, NoTransition, tr, "a request in flight when it opened changes nothing")
	require.Equal(t, time.Minute, b.ProbeInterval)

	_, n := b.Allow(now.Add(59 * time.Second))
	require.Zero(t, n, "no attempts while open")
	b, n = b.Allow(now.Add(time.Minute))
	require.Equal(t, 1, n, "one probe")
	require.Equal(t, sluice.CircuitHalfOpen, b.State)

	// Failed probes double the interval up to an hour, without new alerts.
	want := []time.Duration{2, 4, 8, 16, 32, 60, 60}
	for _, minutes := range want {
		b, tr = b.Record(false, "status 503", now, cfg)
		require.Equal(t, NoTransition, tr)
		require.Equal(t, minutes*time.Minute, b.ProbeInterval)
		b, _ = b.Allow(*b.NextProbeAt)
	}
	b, tr = b.Record(true, "", now, cfg)
	require.Equal(t, CircuitClosed, tr)
	require.Equal(t, Breaker{State: sluice.CircuitClosed}, b)

	_, n = b.Allow(now)
	require.Equal(t, -1, n)
}

func TestManualClose(t *testing.T) {
	t.Parallel()
	_, tr := Breaker{State: sluice.CircuitClosed}.Close()
	require.Equal(t, NoTransition, tr)
	b, tr := Breaker{State: sluice.CircuitOpen, Failures: 9}.Close()
	require.Equal(t, CircuitClosed, tr)
	require.Zero(t, b.Failures)
}

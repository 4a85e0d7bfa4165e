package jobs

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBackoffStaysShortThroughAnOutage: the waits after the first failures
// grow from 100ms to 2s and stay there for minutes, so an outage delays
// nothing by more than a few seconds once it ends; and the attempts last
// for days, so a fan-out never gives up while the database is down.
func TestBackoffStaysShortThroughAnOutage(t *testing.T) {
	t.Parallel()
	within := func(attempt int, want time.Duration) {
		t.Helper()
		for range 50 {
			got := Backoff(attempt)
			require.GreaterOrEqual(t, got, want*8/10, "attempt %d", attempt)
			require.LessOrEqual(t, got, want*12/10, "attempt %d", attempt)
		}
	}
	within(1, 100*time.Millisecond)
	within(3, 400*time.Millisecond)
	within(6, 2*time.Second)
	within(200, 2*time.Second)
	within(201, 30*time.Second)

	var total time.Duration
	for a := 1; a < retryAttempts; a++ {
		total += Backoff(a)
	}
	require.Greater(t, total, 72*time.Hour, "fan-out and dispatch jobs outlast a long outage")
	var elapsed time.Duration
	n := 0
	for ; elapsed < 5*time.Minute; n++ {
		elapsed += Backoff(n + 1)
	}
	require.Less(t, Backoff(n), 3*time.Second, "five minutes into an outage, a retry is still seconds away")
}

// TestLiveStatesAreOneList: the live states are the states a dispatch job
// is unique across, and the predicate of the index of live dispatch jobs,
// written in the same order so that Postgres matches the statements'
// condition to it (TestLiveDispatchProbesOnlyLiveDispatchJobs).
func TestLiveStatesAreOneList(t *testing.T) {
	t.Parallel()
	require.Equal(t, "('available', 'pending', 'running', 'scheduled', 'retryable')", LiveStatesSQL)
	require.Equal(t, LiveStates, DispatchArgs{}.InsertOpts().UniqueOpts.ByState)
	index, err := os.ReadFile("../../db/migrations/00015_live_dispatch_jobs_index.sql")
	require.NoError(t, err)
	require.Contains(t, string(index), "WHERE kind = 'dispatch' AND state IN "+LiveStatesSQL+";")
}

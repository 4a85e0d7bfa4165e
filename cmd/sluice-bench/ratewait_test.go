package main

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/jobs"
)

// TestSpreadOf: runs are counted per worker process (each attempt), an
// endpoint counts as sent to from both when runs of two processes served
// it, and only runs of one endpoint that overlapped in time count as
// overlapping (a run that never started overlaps nothing).
func TestSpreadOf(t *testing.T) {
	t.Parallel()
	at := func(s int) *time.Time { v := time.Unix(int64(s), 0); return &v }
	a, b := uuid.New(), uuid.New()
	d := spreadOf([]jobs.DispatchRun{
		{JobID: 1, EndpointID: a, AttemptedAt: at(0), Until: *at(10), AttemptedBy: []string{"w1"}},
		{JobID: 2, EndpointID: a, AttemptedAt: at(5), Until: *at(15), AttemptedBy: []string{"w2"}}, // overlaps 1
		{JobID: 3, EndpointID: a, AttemptedAt: at(15), Until: *at(20), AttemptedBy: []string{"w1", "w1"}},
		{JobID: 4, EndpointID: b, AttemptedAt: at(0), Until: *at(30), AttemptedBy: []string{"w1"}},
		{JobID: 5, EndpointID: b, AttemptedAt: nil, Until: *at(30)},
	})
	require.Equal(t, []int{4, 1}, d.perClient)
	require.Equal(t, 1, d.both)
	require.Equal(t, 1, d.overlaps)
}

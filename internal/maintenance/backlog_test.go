package maintenance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

func TestBacklogDecision(t *testing.T) {
	t.Parallel()
	both := sluice.BacklogAlert{Queued: 100, OldestSeconds: 60}
	tests := []struct {
		name   string
		b      backlog
		reason string
		rearms bool
	}{
		{"quiet", backlog{Alert: both, Queued: 99, Waited: 59 * time.Second}, "", false},
		{"queued reached", backlog{Alert: both, Queued: 100}, sluice.ReasonQueued, false},
		{"waited long enough", backlog{Alert: both, Queued: 3, Waited: time.Minute}, sluice.ReasonOldest, false},
		{"both: queued named", backlog{Alert: both, Queued: 100, Waited: time.Hour}, sluice.ReasonQueued, false},
		{"nothing due yet", backlog{Alert: sluice.BacklogAlert{OldestSeconds: 60}, Queued: 1, Waited: -time.Hour}, "", false},
		{"alerted, still high", backlog{Alert: both, Alerted: true, Queued: 100}, "", false},
		{"alerted, at half", backlog{Alert: both, Alerted: true, Queued: 50}, "", false},
		{"alerted, below half of queued but not of waited", backlog{Alert: both, Alerted: true, Queued: 49, Waited: 30 * time.Second}, "", false},
		{"alerted, below half of both", backlog{Alert: both, Alerted: true, Queued: 49, Waited: 29 * time.Second}, "", true},
		{"alerted, queued only, drained", backlog{Alert: sluice.BacklogAlert{Queued: 100}, Alerted: true, Waited: time.Hour}, "", true},
		{"not alerted: nothing to rearm", backlog{Alert: both}, "", false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.reason, backlogReason(tt.b), tt.name)
		require.Equal(t, tt.rearms, backlogRearms(tt.b), tt.name)
	}
}

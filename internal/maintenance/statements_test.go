package maintenance

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/testkit/stmtcount"
)

// TestIdleSweepStatements: a sweep with nothing to do (no dead run, no
// retry due, and no walk, backlog or certificate turn open) is three
// statements, each alone on the pool: the turns' claim, the search for
// dead runs and the retries due. The replacements' transactions come only
// when the search finds a dead run (TestSweepReplacesDeadRunsOnly).
func TestIdleSweepStatements(t *testing.T) {
	t.Parallel()
	f := stmtcount.New(t)
	ctx := context.Background()
	s, err := NewSweeper(f.Store, SweeperConfig{
		Interval: time.Nanosecond, WalkInterval: time.Hour, BacklogInterval: time.Hour, CertificateInterval: time.Hour,
		Nudger: dispatch.NewNudger(f.Store, f.Jobs, dispatch.NudgerConfig{}),
	})
	require.NoError(t, err)
	require.NoError(t, s.Sweep(ctx), "the first sweep takes every turn")

	f.Counter.Start()
	require.NoError(t, s.Sweep(ctx))
	counts := f.Counter.Stop()
	require.Equal(t, 3, counts.Total(), "an idle sweep's statements:\n%s", counts)
}

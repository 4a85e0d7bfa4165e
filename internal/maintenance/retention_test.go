package maintenance

import (
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/jobs"
)

// TestRetentionWorkerTimeout: River gives a retention run RetentionTimeout,
// not its default minute (a method of another name would leave River's
// default in place).
func TestRetentionWorkerTimeout(t *testing.T) {
	t.Parallel()
	w, err := NewRetentionWorker(nil, RetentionConfig{Delivered: time.Hour, Dead: time.Hour})
	require.NoError(t, err)
	var worker river.Worker[jobs.RetentionArgs] = w
	require.Equal(t, RetentionTimeout, worker.Timeout(nil))
}

func TestRetentionConfigResolve(t *testing.T) {
	t.Parallel()
	c, err := RetentionConfig{Delivered: time.Hour, Dead: time.Hour}.Resolve()
	require.NoError(t, err)
	require.Equal(t, jobs.SystemClock, c.Clock)
	_, err = RetentionConfig{Dead: time.Hour}.Resolve()
	require.ErrorContains(t, err, "Delivered must be positive", "zero would drop every week")
	_, err = RetentionConfig{Delivered: time.Hour}.Resolve()
	require.ErrorContains(t, err, "Dead must be positive")
}

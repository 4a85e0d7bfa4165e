package maintenance

import (
	"testing"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/jobs"
)

// TestRetentionWorkerTimeout: River gives a retention run RetentionTimeout,
// not its default minute (a method of another name would leave River's
// default in place).
func TestRetentionWorkerTimeout(t *testing.T) {
	t.Parallel()
	var w river.Worker[jobs.RetentionArgs] = NewRetentionWorker(nil, RetentionConfig{})
	require.Equal(t, RetentionTimeout, w.Timeout(nil))
}

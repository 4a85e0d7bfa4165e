package config

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDevMailLog: SLUICE_DEV_MAIL_LOG is off unless set, as `make run`
// sets it (scripts/run.sh), and a value that is not a boolean is refused.
func TestDevMailLog(t *testing.T) {
	t.Parallel()
	c, err := Parse(env(map[string]string{"DATABASE_URL": "postgres://x"}), false)
	require.NoError(t, err)
	require.False(t, c.DevMailLog)
	c, err = Parse(env(map[string]string{"DATABASE_URL": "postgres://x", "SLUICE_DEV_MAIL_LOG": "true"}), false)
	require.NoError(t, err)
	require.True(t, c.DevMailLog)
	_, err = Parse(env(map[string]string{"DATABASE_URL": "postgres://x", "SLUICE_DEV_MAIL_LOG": "yes please"}), false)
	require.ErrorContains(t, err, "SLUICE_DEV_MAIL_LOG")

	script, err := os.ReadFile("../../scripts/run.sh")
	require.NoError(t, err)
	require.Contains(t, string(script), "export SLUICE_DEV_MAIL_LOG=${SLUICE_DEV_MAIL_LOG:-true}", "make run logs members' links")
}

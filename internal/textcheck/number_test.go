package textcheck_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/textcheck"
)

// TestNumberFits holds the limits of a Postgres numeric as jsonb reads a
// JSON number; TestNumbersFitAsPostgresSays (internal/filter) checks the
// same boundaries against Postgres itself.
func TestNumberFits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    string
		fits bool
	}{
		{"0", true}, {"-1.5", true}, {"1e1000", true}, {"1E+1000", true}, {"-1e-1000", true},
		{"1e131071", true}, {"1e131072", false}, {"9" + strings.Repeat("0", 131071), true},
		{"1" + strings.Repeat("0", 131072), false}, {"0.000001e131076", true},
		{"1e-16383", true}, {"1e-16384", false}, {"0." + strings.Repeat("0", 16382) + "1", true},
		{"0." + strings.Repeat("0", 16383) + "1", false}, {"1." + strings.Repeat("0", 16383), true},
		{"1." + strings.Repeat("0", 16384), false}, {"0e-16384", false}, {"0.1e200000", false}, {"0.1e131072", true}, {"1.5e-16382", true},
		{"1e99999999999", false}, {"1e-99999999999", false},
	} {
		require.Equal(t, tc.fits, textcheck.NumberFits(tc.n), "%.40s (%d characters)", tc.n, len(tc.n))
	}
}

func TestLargeNumber(t *testing.T) {
	t.Parallel()
	require.Equal(t, -1, textcheck.LargeNumber([]byte(`{"a": 1, "b": [1e1000, -2.5e-3], "c": "1e99999"}`)))
	require.Equal(t, 13, textcheck.LargeNumber([]byte(`{"a": 1, "b":1e999999}`)))
	require.Equal(t, -1, textcheck.LargeNumber([]byte(`{"a\"1e99999": 1}`)), "inside a string, after an escaped quote")
	require.Equal(t, 6, textcheck.LargeNumber([]byte(`{"a": 0.`+strings.Repeat("0", 20000)+`1}`)))
}

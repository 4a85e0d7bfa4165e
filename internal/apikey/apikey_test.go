package apikey

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestKeys(t *testing.T) {
	t.Parallel()
	a, b := New(), New()
	require.NotEqual(t, a, b)
	require.True(t, WellFormed(a))
	require.Len(t, Hash(a), 32)
	require.NotEqual(t, Hash(a), Hash(b))
	require.Equal(t, a[:7], DisplayPrefix(a))

	for _, bad := range []string{"", "sk_", "pk_" + a[3:], a + "x", a[:len(a)-1] + "!"} {
		require.False(t, WellFormed(bad), bad)
	}
}

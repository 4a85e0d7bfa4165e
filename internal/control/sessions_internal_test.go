package control

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestSessionToken(t *testing.T) {
	t.Parallel()
	a, ha := newSession(time.Now())
	b, hb := newSession(time.Now())
	require.NotEqual(t, a.Token, b.Token, "every sign-in is unique")
	require.True(t, WellFormedSessionToken(a.Token))
	require.Len(t, ha, 32)
	require.Equal(t, ha, sessionHash(a.Token))
	require.NotEqual(t, ha, hb)
	for _, bad := range []string{"", "x", a.Token[:len(a.Token)-1], a.Token + "A", strings.Repeat("!", len(a.Token)),
		"v1." + uuid.NewString() + ".99999999999.bm9uY2U.c2ln"} {
		require.False(t, WellFormedSessionToken(bad), bad)
	}
}

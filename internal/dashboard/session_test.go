package dashboard

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestSessionToken(t *testing.T) {
	a, b := newSessionToken(), newSessionToken()
	require.NotEqual(t, a, b, "every sign-in is unique")
	require.True(t, wellFormedToken(a))
	require.Len(t, tokenHash(a), 32)
	require.NotEqual(t, tokenHash(a), tokenHash(b))
	for _, bad := range []string{"", "x", a[:len(a)-1], a + "A", strings.Repeat("!", len(a)),
		"v1." + uuid.NewString() + ".99999999999.bm9uY2U.c2ln"} {
		require.False(t, wellFormedToken(bad), bad)
	}
}

func TestCSRFToken(t *testing.T) {
	s := csrfSigner{key: deriveKey([]byte("k"), csrfKeyLabel)}
	tok := s.token("cookie-a")
	require.True(t, s.valid("cookie-a", tok))
	require.False(t, s.valid("cookie-b", tok))
	require.False(t, s.valid("cookie-a", ""))
	require.False(t, csrfSigner{key: deriveKey([]byte("k2"), csrfKeyLabel)}.valid("cookie-a", tok))
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/endpoints/x?status=dead": "/endpoints/x?status=dead",
		"":                         "/",
		"https://evil.test":        "/",
		"//evil.test":              "/",
		`/\evil.test`:              "/",
		"evil":                     "/",
	} {
		require.Equal(t, want, safeNext(in), in)
	}
}

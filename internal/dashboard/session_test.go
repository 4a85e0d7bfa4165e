package dashboard

import (
	"testing"

	"github.com/stretchr/testify/require"
)

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

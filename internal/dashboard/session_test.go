package dashboard

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestSessionCodec(t *testing.T) {
	c := sessionCodec{key: deriveKey([]byte("k"), sessionKeyLabel)}
	id := uuid.New()
	now := time.Now()
	v := c.encode(id, now.Add(time.Hour))

	got, err := c.decode(v, now)
	require.NoError(t, err)
	require.Equal(t, id, got)

	_, err = c.decode(v, now.Add(time.Hour))
	require.ErrorIs(t, err, errBadSession, "expired")

	other := sessionCodec{key: deriveKey([]byte("k2"), sessionKeyLabel)}
	_, err = other.decode(v, now)
	require.ErrorIs(t, err, errBadSession, "another key")

	// The raw key, or the CSRF key, does not sign sessions.
	for _, k := range [][]byte{[]byte("k"), deriveKey([]byte("k"), csrfKeyLabel)} {
		_, err = sessionCodec{key: k}.decode(v, now)
		require.ErrorIs(t, err, errBadSession)
	}
	require.NotEqual(t, v, c.encode(id, now.Add(time.Hour)), "every sign-in is unique")

	for _, bad := range []string{"", ".", "v1", strings.Repeat(".", 4), "v2" + v[2:], v + "x", v[:len(v)-1]} {
		_, err = c.decode(bad, now)
		require.ErrorIs(t, err, errBadSession, bad)
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

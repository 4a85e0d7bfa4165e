package member_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/member"
)

// TestPasswords: a hash checks its own password only, is salted, and an
// empty or malformed hash matches nothing.
func TestPasswords(t *testing.T) {
	t.Parallel()
	h := member.HashPassword("correct horse battery")
	require.True(t, strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$"), h)
	require.True(t, member.CheckPassword(h, "correct horse battery"))
	require.False(t, member.CheckPassword(h, "correct horse batterY"))
	require.NotEqual(t, h, member.HashPassword("correct horse battery"), "salted")
	require.False(t, member.CheckPassword("", ""))
	require.False(t, member.CheckPassword("$argon2id$v=19$m=0,t=0,p=0$$", "x"))
	require.False(t, member.CheckPassword("plain", "plain"))

	require.Error(t, member.ValidatePassword("eleven char"))
	require.NoError(t, member.ValidatePassword("twelve chars"))
	require.NoError(t, member.ValidatePassword("ünïcödé pässwörd"))
	require.Error(t, member.ValidatePassword(strings.Repeat("x", member.MaxPasswordLength+1)))
}

// TestTokens: tokens are random and well formed, and the link carries one.
func TestTokens(t *testing.T) {
	t.Parallel()
	a, b := member.NewToken(), member.NewToken()
	require.NotEqual(t, a, b)
	require.True(t, member.WellFormedToken(a))
	require.False(t, member.WellFormedToken(a[1:]))
	require.False(t, member.WellFormedToken(strings.Repeat("!", len(a))))
	require.Len(t, member.TokenHash(a), 32)
	require.Equal(t, "https://s.example/password?token="+a, member.PasswordLink("https://s.example", a))
}

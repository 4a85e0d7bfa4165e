package member_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/member"
)

// TestRoleAllows: an owner may do everything, an admin everything but
// member.*, a viewer nothing an action names (a secret's reveal included)
// and no guarded read.
func TestRoleAllows(t *testing.T) {
	t.Parallel()
	for _, action := range []string{"endpoint.updated", "endpoint.secret_revealed", "delivery.replayed", member.ReadAuditLog,
		"member.invited", "member.removed", member.ReadMembers} {
		isMember := strings.HasPrefix(action, "member.")
		require.True(t, member.Owner.Allows(action), action)
		require.Equal(t, !isMember, member.Admin.Allows(action), action)
		require.False(t, member.Viewer.Allows(action), action)
		require.False(t, member.Role("root").Allows(action), action)
	}
	require.False(t, member.Owner.ReadOnly())
	require.False(t, member.Admin.ReadOnly())
	require.True(t, member.Viewer.ReadOnly())
}

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

// TestNewParams: a bare email address and a known role.
func TestNewParams(t *testing.T) {
	t.Parallel()
	require.NoError(t, member.NewParams{Email: "ann@acme.test", Role: member.Viewer}.Validate())
	for _, email := range []string{"", "ann", "ann@acme", "Ann <ann@acme.test>", "ann@acme.test, bob@acme.test", strings.Repeat("a", 250) + "@x.test"} {
		require.Error(t, member.NewParams{Email: email, Role: member.Viewer}.Validate(), email)
	}
	require.Error(t, member.NewParams{Email: "ann@acme.test", Role: "root"}.Validate())
	require.Error(t, member.NewParams{Email: "ann@acme.test"}.Validate())
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

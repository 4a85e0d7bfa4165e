package sluice_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// TestRoleAllows: an owner may do everything, an admin everything but
// member.*, a viewer nothing an action names (a secret's reveal included)
// and no guarded read.
func TestRoleAllows(t *testing.T) {
	t.Parallel()
	for _, action := range []string{"endpoint.updated", "endpoint.secret_revealed", "delivery.replayed", "audit_log.read",
		"member.invited", "member.removed", "member.read"} {
		isMember := strings.HasPrefix(action, "member.")
		require.True(t, sluice.RoleOwner.Allows(action), action)
		require.Equal(t, !isMember, sluice.RoleAdmin.Allows(action), action)
		require.False(t, sluice.RoleViewer.Allows(action), action)
		require.False(t, sluice.Role("root").Allows(action), action)
	}
	require.False(t, sluice.RoleOwner.ReadOnly())
	require.False(t, sluice.RoleAdmin.ReadOnly())
	require.True(t, sluice.RoleViewer.ReadOnly())
}

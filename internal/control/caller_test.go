package control_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// TestRolesAllow holds each role to every action: an owner (and an API
// key) may do all, an admin all but the member.* ones, a viewer none; a
// read-only session none whatever its role.
func TestRolesAllow(t *testing.T) {
	t.Parallel()
	require.NotEmpty(t, control.Actions)
	for _, role := range sluice.Roles {
		for _, act := range control.Actions {
			want := role == sluice.RoleOwner || role == sluice.RoleAdmin && !strings.HasPrefix(string(act), "member.")
			require.Equal(t, want, control.Caller{Role: role}.Allows(act), "%s may %s", role, act)
			require.False(t, control.Caller{Role: role, ReadOnly: true}.Allows(act), "read-only %s may not %s", role, act)
		}
	}
}

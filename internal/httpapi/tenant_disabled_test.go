package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDisabledTenantIsRefused: within a second of an operator disabling a
// tenant, each of its keys answers 403 tenant-disabled (the key is valid,
// the account is not: unlike 401, a client should not rotate its key);
// other tenants are untouched, and enabling it again restores access as
// fast.
func TestDisabledTenantIsRefused(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	status := func(key string) int { return b.do(key, http.MethodGet, "/v1/endpoints", nil).Status }
	require.Equal(t, http.StatusOK, status(b.keyA)) // now in the key cache

	disabled, err := b.store.SetTenantDisabled(ctx, b.tenantA.ID, true)
	require.NoError(t, err)
	require.True(t, disabled.Disabled())
	start := time.Now()
	require.Eventually(t, func() bool { return status(b.keyA) == http.StatusForbidden }, time.Second, 20*time.Millisecond)
	t.Logf("refused %v after disabling", time.Since(start).Round(time.Millisecond))
	p := requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/events", map[string]any{"type": "a", "payload": map[string]any{}}), http.StatusForbidden)
	require.Equal(t, "https://sluice.dev/problems/tenant-disabled", p["type"])
	require.Equal(t, http.StatusOK, status(b.keyB), "another tenant")

	again, err := b.store.SetTenantDisabled(ctx, b.tenantA.ID, true)
	require.NoError(t, err)
	require.Equal(t, disabled.DisabledAt, again.DisabledAt, "disabling twice keeps the first time")

	enabled, err := b.store.SetTenantDisabled(ctx, b.tenantA.ID, false)
	require.NoError(t, err)
	require.False(t, enabled.Disabled())
	require.Eventually(t, func() bool { return status(b.keyA) == http.StatusOK }, time.Second, 20*time.Millisecond)

	// An unknown key of any tenant is still 401, never 403.
	requireProblem(t, b.do("sk_"+"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", http.MethodGet, "/v1/endpoints", nil), http.StatusUnauthorized)
}

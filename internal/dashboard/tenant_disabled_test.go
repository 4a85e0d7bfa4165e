package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDisabledTenantEndsDashboardSessions: disabling a tenant signs its
// sessions out at once and refuses its keys at sign-in with 403; other
// tenants' sessions stay, and enabling it lets it sign in again.
func TestDisabledTenantEndsDashboardSessions(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	a, other := b.browser(), b.browser()
	a.login(b.keyA)
	other.login(b.keyB)
	old := a.sessionCookie()

	_, err := b.store.SetTenantDisabled(ctx, b.tenantA.ID, true)
	require.NoError(t, err)
	p := a.get("/")
	require.Equal(t, http.StatusSeeOther, p.Status)
	require.Equal(t, "/login", p.Location())
	require.Equal(t, http.StatusOK, other.get("/").Status, "another tenant's session")

	p = b.browser().post("/login", url.Values{"api_key": {b.keyA}})
	require.Equal(t, http.StatusForbidden, p.Status)
	requireContains(t, p, "This account is disabled.")

	_, err = b.store.SetTenantDisabled(ctx, b.tenantA.ID, false)
	require.NoError(t, err)
	replay := b.browser()
	replay.setSessionCookie(old)
	require.Equal(t, http.StatusSeeOther, replay.get("/").Status, "enabling does not bring an ended session back")
	b.browser().login(b.keyA)
}

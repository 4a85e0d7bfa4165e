package dashboard_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSettingsPage: the settings page shows the server's retention until
// the tenant sets its own; a value out of bounds is refused naming the
// field, the form refilled; a saved one is shown, and an empty field goes
// back to the server's.
func TestSettingsPage(t *testing.T) {
	b := setup(t)
	br := b.browser()
	br.login(b.keyA)
	p := br.get("/settings")
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, "336h (the server&#39;s)", "720h (the server&#39;s)", `id="set-retention"`)

	token := br.csrf("/settings")
	bad := br.post("/settings", url.Values{"csrf_token": {token}, "retention": {"30m"}, "dead_retention": {"72h"}})
	require.Equal(t, http.StatusUnprocessableEntity, bad.Status, bad.Body)
	requireContains(t, bad, "Retention must be from 1h", `value="30m"`)

	saved := br.post("/settings", url.Values{"csrf_token": {token}, "retention": {"24h"}, "dead_retention": {"72h"}})
	require.Equal(t, http.StatusSeeOther, saved.Status, saved.Body)
	require.Equal(t, "/settings?done=saved", saved.Location())
	p = br.get("/settings?done=saved")
	requireContains(t, p, "Retention saved.", `id="retention-value">24h<`, `id="dead-retention-value">72h<`)

	require.Equal(t, http.StatusSeeOther, br.post("/settings", url.Values{"csrf_token": {token}, "retention": {""}, "dead_retention": {"72h"}}).Status)
	requireContains(t, br.get("/settings"), "336h (the server&#39;s)", `id="dead-retention-value">72h<`)
}

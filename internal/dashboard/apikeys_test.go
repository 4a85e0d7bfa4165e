package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/dashboard"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
)

// TestSignOutEndsSessionOnServer: after sign-out, a copy of the old cookie
// gets the sign-in page, and its CSRF token no longer works.
func TestSignOutEndsSessionOnServer(t *testing.T) {
	b := setup(t)
	br := b.browser()
	br.login(b.keyA)
	old := br.sessionCookie()
	token := br.csrf("/")
	p := br.post("/logout", url.Values{"csrf_token": {token}})
	require.Equal(t, http.StatusSeeOther, p.Status)

	replay := b.browser()
	replay.setSessionCookie(old)
	p = replay.get("/")
	require.Equal(t, http.StatusSeeOther, p.Status)
	require.Equal(t, "/login", p.Location())
	p = replay.get("/login")
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, `name="api_key"`)
	replay.setSessionCookie(old)
	p = replay.post("/api-keys", url.Values{"csrf_token": {token}, "name": {"x"}})
	require.Equal(t, http.StatusForbidden, p.Status)
}

// TestRevokedKeyEndsDashboardSession: revoking (or the expiry of) the key a
// session was opened with signs it out at once; other sessions stay.
func TestRevokedKeyEndsDashboardSession(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	k := sluice.NewAPIKey{Key: apikey.New()}
	var err error
	k.APIKey, err = b.store.CreateAPIKey(ctx, b.tenantA.ID, sluice.NewAPIKeyParams{Name: "laptop"}, apikey.Digest(k.Key))
	require.NoError(t, err)
	exp := time.Now().Add(time.Hour)
	short := sluice.NewAPIKey{Key: apikey.New()}
	short.APIKey, err = b.store.CreateAPIKey(ctx, b.tenantA.ID, sluice.NewAPIKeyParams{Name: "short", ExpiresAt: &exp}, apikey.Digest(short.Key))
	require.NoError(t, err)

	viaK, viaA, viaShort := b.browser(), b.browser(), b.browser()
	viaK.login(k.Key)
	viaA.login(b.keyA)
	viaShort.login(short.Key)
	for _, br := range []*browser{viaK, viaA, viaShort} {
		require.Equal(t, http.StatusOK, br.get("/").Status)
	}

	require.NoError(t, store.ExecRows(ctx, b.store, (*dbq.Queries).DeleteAPIKey, dbq.DeleteAPIKeyParams{TenantID: b.tenantA.ID, ID: k.ID}))
	p := viaK.get("/")
	require.Equal(t, http.StatusSeeOther, p.Status, "signed out at once")
	require.True(t, strings.HasPrefix(p.Location(), "/login"))
	require.Equal(t, http.StatusOK, viaA.get("/").Status, "another key's session stays")

	// The short key's hour passes: sessions check a key's expiry against
	// the database's clock, so move the expiry instead of waiting for it.
	_, err = b.store.Pool().Exec(ctx, `UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1`, short.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusSeeOther, viaShort.get("/").Status, "an expired key's session ends")
	require.Equal(t, http.StatusOK, viaA.get("/").Status)
}

// TestAPIKeysPage lists, creates and revokes keys through the forms.
func TestAPIKeysPage(t *testing.T) {
	b := setup(t)
	br := b.browser()
	br.login(b.keyA)
	p := br.get("/api-keys")
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, "default", "(this session)", `action="/api-keys"`)
	require.NotContains(t, p.Body, b.keyA)
	token := br.csrf("/api-keys")

	// Create: the key is shown in the answer, and only there.
	p = br.post("/api-keys", url.Values{"csrf_token": {token}, "name": {"ci"}, "expires": {"30"}})
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	page, err := b.store.ListAPIKeys(context.Background(), b.tenantA.ID, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 2)
	ci := page.Items[0]
	require.Equal(t, "ci", ci.Name)
	require.NotNil(t, ci.ExpiresAt)
	require.WithinDuration(t, time.Now().Add(30*24*time.Hour), *ci.ExpiresAt, time.Minute)
	requireContains(t, p, `id="new-key-value"`, ci.Prefix)
	require.NotContains(t, br.get("/api-keys").Body, `id="new-key-value"`)

	// Refused input.
	p = br.post("/api-keys", url.Values{"csrf_token": {token}, "name": {"  "}})
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, "Name is required.")
	p = br.post("/api-keys", url.Values{"csrf_token": {token}, "name": {"x"}, "expires": {"3"}})
	require.Equal(t, http.StatusBadRequest, p.Status)
	p = br.post("/api-keys", url.Values{"name": {"x"}})
	require.Equal(t, http.StatusForbidden, p.Status, "no CSRF token")

	// Revoke: a confirmation page first; the POST does it.
	revoke := "/api-keys/" + ci.ID.String() + "/revoke"
	p = br.get(revoke)
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, `id="confirm-revoke"`, "ci")
	_, err = b.store.GetAPIKey(context.Background(), b.tenantA.ID, ci.ID)
	require.NoError(t, err, "not revoked by looking")
	p = br.post(revoke, url.Values{"csrf_token": {token}})
	require.Equal(t, http.StatusSeeOther, p.Status)
	require.Equal(t, "/api-keys?revoked=1", p.Location())
	_, err = b.store.GetAPIKey(context.Background(), b.tenantA.ID, ci.ID)
	require.ErrorIs(t, err, sluice.ErrNotFound)

	// Another tenant's key is not found, and stays.
	bPage, err := b.store.ListAPIKeys(context.Background(), b.tenantB.ID, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	other := "/api-keys/" + bPage.Items[0].ID.String() + "/revoke"
	require.Equal(t, http.StatusNotFound, br.get(other).Status)
	require.Equal(t, http.StatusNotFound, br.post(other, url.Values{"csrf_token": {token}}).Status)
	_, err = b.store.AuthenticateAPIKey(context.Background(), apikey.Hash(b.keyB))
	require.NoError(t, err)

	// Revoking the session's own key signs out.
	self := "/api-keys/" + page.Items[1].ID.String() + "/revoke"
	requireContains(t, br.get(self), "revoking it signs you out")
	p = br.post(self, url.Values{"csrf_token": {token}})
	require.Equal(t, http.StatusSeeOther, p.Status)
	require.Equal(t, "/login", p.Location())
	require.Equal(t, http.StatusSeeOther, br.get("/").Status)
}

// TestSecureCookieFromPublicURL: with an https public URL the cookie is
// Secure even when the TLS proxy in front does not say so.
func TestSecureCookieFromPublicURL(t *testing.T) {
	b := setup(t)
	srv := httptest.NewServer(dashboard.New(controltest.New(b.store, controltest.Options{PortalKey: dashboardKey, Nudger: b.nudger}), dashboard.Config{Key: dashboardKey, SecureCookies: true}).Handler())
	t.Cleanup(srv.Close)
	res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).
		PostForm(srv.URL+"/login", url.Values{"api_key": {b.keyA}})
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Len(t, res.Cookies(), 1)
	c := res.Cookies()[0]
	require.True(t, c.Secure)
	require.True(t, c.HttpOnly)
	require.Equal(t, http.SameSiteLaxMode, c.SameSite)
}

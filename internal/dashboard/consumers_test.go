package dashboard_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// formOf is a form with the CSRF token and name, value pairs.
func formOf(token string, kv ...string) url.Values {
	v := url.Values{"csrf_token": {token}}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return v
}

// TestConsumerForms drives the consumer forms over HTTP: create with the
// API's rules (a taken uid refused, never overwritten), edit, and delete
// behind its confirmation page; every form needs the CSRF token.
func TestConsumerForms(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	br := b.browser()
	br.login(b.keyA)
	token := br.csrf("/consumers")

	p := br.get("/consumers")
	requireContains(t, p, `id="consumer-form"`, `action="/consumers"`, "No consumers yet.")

	// Refused, with the API's messages, the form filled back.
	p = br.post("/consumers", formOf(token, "uid", "bad uid", "name", "Initech"))
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, "UID "+html.EscapeString(sluice.ConsumerUIDRule)+".", `value="bad uid"`, `value="Initech"`)
	p = br.post("/consumers", formOf(token, "uid", "c1", "alert_email", "not an address"))
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, "Alert email must be one email address")

	// Created; the page says so.
	p = br.post("/consumers", formOf(token, "uid", "c1", "name", "Initech", "alert_email", "ops@initech.test"))
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/consumers/c1?done=created", p.Location())
	c, err := b.store.GetConsumer(ctx, b.tenantA.ID, "c1")
	require.NoError(t, err)
	require.Equal(t, "Initech", c.Name)
	require.Equal(t, "ops@initech.test", *c.AlertEmail)
	p = br.get(p.Location())
	requireContains(t, p, "Consumer created.", "ops@initech.test", `href="/consumers/c1/edit"`, `href="/consumers/c1/delete"`)

	// A taken uid is refused.
	p = br.post("/consumers", formOf(token, "uid", "c1", "name", "Other"))
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, "A consumer with the UID c1 exists already.")
	c, err = b.store.GetConsumer(ctx, b.tenantA.ID, "c1")
	require.NoError(t, err)
	require.Equal(t, "Initech", c.Name, "not overwritten")

	// Edit: the form fills back; an empty address falls back to the
	// tenant's.
	p = br.get("/consumers/c1/edit")
	requireContains(t, p, `value="Initech"`, `value="ops@initech.test"`)
	p = br.post("/consumers/c1/edit", formOf(token, "name", "Initech Ltd", "alert_email", "nope"))
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, "Alert email must be one email address", `value="Initech Ltd"`)
	p = br.post("/consumers/c1/edit", formOf(token, "name", "Initech Ltd", "alert_email", ""))
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	c, err = b.store.GetConsumer(ctx, b.tenantA.ID, "c1")
	require.NoError(t, err)
	require.Equal(t, "Initech Ltd", c.Name)
	require.Nil(t, c.AlertEmail)
	requireContains(t, br.get(p.Location()), "Consumer saved.")

	// Without the token, nothing changes.
	p = br.post("/consumers/c1/edit", url.Values{"name": {"Forged"}})
	require.Equal(t, http.StatusForbidden, p.Status)

	// Delete: a confirmation page first; an unconfirmed post goes back to it.
	b.seedFor(b.tenantA, "c1", "https://c1.test/hooks")
	p = br.get("/consumers/c1/delete")
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, "Delete the consumer c1?", "It goes with 1 endpoint of its own", `name="confirm" value="yes"`)
	p = br.post("/consumers/c1/delete", formOf(token))
	require.Equal(t, http.StatusSeeOther, p.Status)
	require.Equal(t, "/consumers/c1/delete", p.Location())
	_, err = b.store.GetConsumer(ctx, b.tenantA.ID, "c1")
	require.NoError(t, err, "not deleted unconfirmed")
	p = br.post("/consumers/c1/delete", formOf(token, "confirm", "yes"))
	require.Equal(t, http.StatusSeeOther, p.Status)
	require.Equal(t, "/consumers?done=deleted", p.Location())
	_, err = b.store.GetConsumer(ctx, b.tenantA.ID, "c1")
	require.ErrorIs(t, err, sluice.ErrNotFound)
	requireContains(t, br.get(p.Location()), "Consumer deleted")

	// Another tenant's consumer is not found, on every form.
	_, _, err = b.store.UpsertConsumer(ctx, b.tenantB.ID, "theirs", sluice.ConsumerSettings{})
	require.NoError(t, err)
	for _, path := range []string{"/consumers/theirs/edit", "/consumers/theirs/delete", "/consumers/theirs/portal/revoke"} {
		require.Equal(t, http.StatusNotFound, br.get(path).Status, path)
	}
	p = br.post("/consumers/theirs/delete", formOf(token, "confirm", "yes"))
	require.Equal(t, http.StatusNotFound, p.Status)
	_, err = b.store.GetConsumer(ctx, b.tenantB.ID, "theirs")
	require.NoError(t, err)
}

var portalLinkRe = regexp.MustCompile(`id="portal-link-url"[^>]*>([^<]+)<`)

// TestPortalLinkForm: a consumer's page issues a portal link of a chosen
// lifetime, read-only or not, shown in the answer only; the link signs in
// to that consumer's portal; revoking every link (confirmed) ends them.
func TestPortalLinkForm(t *testing.T) {
	b := setup(t)
	w := b.portalWorld()
	br := b.browser()
	br.login(b.keyA)
	token := br.csrf("/consumers/c1")

	p := br.get("/consumers/c1")
	requireContains(t, p, `id="portal-form"`, `action="/consumers/c1/portal"`, `value="86400"`, `href="/consumers/c1/portal/revoke"`)
	require.NotContains(t, p.Body, `id="portal-link-url"`)

	p = br.post("/consumers/c1/portal", formOf(token, "ttl", "12345"))
	require.Equal(t, http.StatusBadRequest, p.Status, "only the offered lifetimes")

	p = br.post("/consumers/c1/portal", formOf(token, "ttl", "86400", "read_only", "1"))
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireContains(t, p, "Read-only portal link issued.", "shown only this once", w.c1.endpoint.URL)
	m := portalLinkRe.FindStringSubmatch(p.Body)
	require.NotNil(t, m, p.Body)
	link := html.UnescapeString(m[1])

	consumer := b.browser()
	consumer.openPortal(link)
	home := consumer.get("/")
	requireContains(t, home, w.c1.endpoint.URL, "read-only")
	require.NotContains(t, home.Body, w.c2.endpoint.URL)
	require.NotContains(t, home.Body, "<form", "a read-only link shows no forms")

	// Revoke every link: confirmed first; the consumer's session ends.
	p = br.get("/consumers/c1/portal/revoke")
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, "Revoke every portal link of c1?", `name="confirm" value="yes"`)
	p = br.post("/consumers/c1/portal/revoke", formOf(token))
	require.Equal(t, "/consumers/c1/portal/revoke", p.Location(), "unconfirmed")
	require.Equal(t, http.StatusOK, consumer.get("/").Status, "still signed in")
	p = br.post("/consumers/c1/portal/revoke", formOf(token, "confirm", "yes"))
	require.Equal(t, http.StatusSeeOther, p.Status)
	require.Equal(t, "/consumers/c1?done=revoked", p.Location())
	requireContains(t, br.get(p.Location()), "Every portal link of this consumer has stopped working")
	require.Equal(t, http.StatusSeeOther, consumer.get("/").Status, "signed out")
	require.Equal(t, http.StatusForbidden, b.browser().get(strings.TrimPrefix(link, b.srv.URL)).Status, "the link is void")

	// A portal session has none of these pages.
	other := b.browser()
	other.openPortal(w.link(t, b.tenantA.ID, "c1", time.Hour, false))
	require.Equal(t, http.StatusNotFound, other.get("/consumers/c1").Status)
	ptoken := other.csrf("/")
	require.Equal(t, http.StatusNotFound, other.post("/consumers/c1/portal", formOf(ptoken, "ttl", "3600")).Status)
	require.Equal(t, http.StatusNotFound, other.post("/consumers", formOf(ptoken, "uid", "c9")).Status)
}

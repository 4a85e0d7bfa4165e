package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dashboard"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
)

// TestAuditEveryDashboardForm: every POST route of the dashboard but
// signing in and out and setting a password is named in the audit table; performing the forms
// adds exactly one entry each, as the session's key, an unconfirmed
// destructive form and a refused form none, and no entry holds a secret.
func TestAuditEveryDashboardForm(t *testing.T) {
	b := setup(t)
	ctx := context.Background()

	var missing []string
	require.NoError(t, chi.Walk(dashboard.New(controltest.New(b.store, controltest.Options{PortalKey: dashboardKey, Nudger: b.nudger}), dashboard.Config{Key: dashboardKey}).Handler().(chi.Routes),
		func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
			public := route == "/login" || route == "/logout" || route == "/password" || route == "/forgot" // no tenant's change
			if method == http.MethodPost && !public && !strings.HasPrefix(route, "/static/") {
				if _, ok := dashboard.AuditActions[method+" "+route]; !ok {
					missing = append(missing, method+" "+route)
				}
			}
			return nil
		}))
	slices.Sort(missing)
	require.Empty(t, missing, "dashboard forms the audit log does not record")

	keys, err := b.store.ListAPIKeys(ctx, b.tenantA.ID, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, keys.Items, 1)
	key := keys.Items[0]
	log := func() []sluice.AuditEntry {
		t.Helper()
		page, err := b.store.AuditLog(ctx, b.tenantA.ID, sluice.AuditFilter{}, sluice.PageParams{Limit: 500})
		require.NoError(t, err)
		return page.Items
	}

	br := b.browser()
	br.login(b.keyA)
	token := br.csrf("/endpoints/new")
	form := func(kv ...string) url.Values {
		v := url.Values{"csrf_token": {token}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v
	}
	var secrets []string
	step := func(path string, f url.Values, action string, changed ...string) page {
		t.Helper()
		before := len(log())
		p := br.post(path, f)
		require.Less(t, p.Status, 400, "%s: %s", path, p.Body)
		entries := log()
		require.Len(t, entries, before+1, "%s: one entry", path)
		e := entries[0]
		require.Equal(t, action, e.Action, path)
		require.Equal(t, sluice.Actor{Type: sluice.ActorAPIKey, ID: key.ID.String(), Name: key.Name}, e.Actor)
		require.NotNil(t, e.ObjectID, path)
		if len(changed) > 0 {
			require.Equal(t, changed, e.Changed)
		}
		return p
	}
	none := func(path string, f url.Values) {
		t.Helper()
		before := len(log())
		br.post(path, f)
		require.Len(t, log(), before, "%s changed nothing, and left no entry", path)
	}

	none("/endpoints", form("url", "ftp://a.test/x", "max_in_flight", "5")) // 422
	p := step("/endpoints", form("url", "https://a.test/x", "max_in_flight", "5", "event_types", "*"), "endpoint.created")
	id := regexp.MustCompile(`/endpoints/([0-9a-f-]{36})`).FindStringSubmatch(p.Location())[1]
	require.Equal(t, id, *log()[0].ObjectID)
	ep := "/endpoints/" + id
	step(ep+"/edit", form("url", "https://b.test/y", "max_in_flight", "7", "event_types", "*"), "endpoint.updated",
		"event_types", "max_in_flight", "url")
	step(ep+"/disable", form("disabled", "1"), "endpoint.updated")
	step(ep+"/test", form(), "endpoint.tested")
	secret := step(ep+"/secret", form(), "endpoint.secret_revealed")
	require.Contains(t, secret.Body, "whsec_")
	none(ep+"/secret/rotate", form())
	step(ep+"/secret/rotate", form("confirm", "yes"), "endpoint.secret_rotated")
	step(ep+"/circuit/close", form(), "endpoint.circuit_closed")
	step(ep+"/throttle/lift", form(), "endpoint.throttle_lifted")
	step(ep+"/edit", form("url", "https://b.test/y", "max_in_flight", "7", "event_types", "*", "verification", "challenge"),
		"endpoint.updated", "disabled", "event_types", "verification") // the form enables it again
	step(ep+"/verify", form(), "endpoint.verification_requested")
	s := b.seed(b.tenantA, "https://c.test/z", true)
	replayed := step("/deliveries/"+s.delivery.ID.String()+"/replay", form(), "delivery.replayed")
	step(replayed.Location()[:len("/deliveries/")+36]+"/retry", form(), "delivery.retried") // the replay, queued
	step("/endpoints/"+s.endpoint.ID.String()+"/replay", form("status", "dead", "confirm", "yes"), "endpoint.replayed")
	none(ep+"/delete", form())
	step(ep+"/delete", form("confirm", "yes"), "endpoint.deleted")
	step("/consumers", form("uid", "c9", "name", "Initech"), "consumer.created")
	step("/consumers/c9/edit", form("name", "Initech Ltd", "alert_email", "ops@initech.test"), "consumer.updated", "alert_email", "name")
	link := step("/consumers/c9/portal", form("ttl", "3600"), "portal_link.created")
	secrets = append(secrets, regexp.MustCompile(`/portal\?token=[^"<&]+`).FindString(link.Body))
	none("/consumers/c9/portal/revoke", form())
	step("/consumers/c9/portal/revoke", form("confirm", "yes"), "portal_link.revoked")
	step("/consumers/c9/delete", form("confirm", "yes"), "consumer.deleted")
	step("/event-types", form("name", "order.shipped", "description", "Shipped"), "event_type.created")
	step("/event-types/order.shipped/edit", form("description", "An order shipped"), "event_type.updated")
	step("/event-types/order.shipped/delete", form("confirm", "yes"), "event_type.deleted")
	created := step("/api-keys", form("name", "ci"), "api_key.created")
	secrets = append(secrets, regexp.MustCompile(`sk_[A-Za-z0-9_-]+`).FindString(created.Body))
	newKey, err := b.store.ListAPIKeys(ctx, b.tenantA.ID, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	step("/api-keys/"+newKey.Items[0].ID.String()+"/revoke", form(), "api_key.revoked")
	invited := step("/members", form("email", "ann@acme.test", "role", "viewer"), "member.invited")
	requireContains(t, invited, "Invitation sent", "ann@acme.test")
	none("/members", form("email", "ANN@acme.test", "role", "admin")) // 409
	members, err := b.store.ListMembers(ctx, b.tenantA.ID, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, members.Items, 1)
	require.Equal(t, members.Items[0].ID.String(), *log()[0].ObjectID)
	mp := "/members/" + members.Items[0].ID.String()
	step(mp+"/edit", form("role", "admin"), "member.updated", "role")
	none(mp+"/remove", form())
	step(mp+"/remove", form("confirm", "yes"), "member.removed")

	none("/settings", form("retention", "30m", "dead_retention", "")) // 422
	step("/settings", form("retention", "24h", "dead_retention", ""), "tenant.retention_updated", "retention")

	// The page shows the log, filtered, and refuses a bad time.
	all := br.get("/audit")
	require.Equal(t, http.StatusOK, all.Status)
	requireContains(t, all, "endpoint.secret_rotated", "API key "+key.Name, "event_types, max_in_flight, url")
	// Object ids link to the object's page when it has one.
	requireContains(t, all,
		`<a href="/endpoints/`+s.endpoint.ID.String()+`"><code>`+s.endpoint.ID.String()+`</code></a>`,
		`<a href="/deliveries/`+s.delivery.ID.String()+`"><code>`+s.delivery.ID.String()+`</code></a>`,
		`<a href="/consumers/c9"><code>c9</code></a>`,
		`<a href="/event-types/order.shipped"><code>order.shipped</code></a>`)
	require.NotContains(t, all.Body, `href="/api-keys/`, "an API key has no page")
	require.NotContains(t, all.Body, `href="/members/`, "nor a member")
	only := br.get("/audit?action=endpoint.deleted")
	requireContains(t, only, "endpoint.deleted", "<code>"+id+"</code>")
	require.NotContains(t, only.Body, `href="/endpoints/`+id+`"`, "a deleted endpoint has no page")
	require.NotContains(t, only.Body, "endpoint.created")
	require.Equal(t, http.StatusUnprocessableEntity, br.get("/audit?since=yesterday").Status)

	for _, e := range log() {
		raw := strings.Join(append([]string{e.Action, e.Actor.Name, *e.ObjectID}, e.Changed...), " ")
		require.NotContains(t, raw, "whsec_")
		for _, s := range secrets {
			require.NotContains(t, raw, s)
		}
	}
}

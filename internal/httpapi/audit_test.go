package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/internal/httpapi"
)

// TestAuditCoversEveryMutatingOperation walks openapi.yaml: every
// operation that changes something (POST, PUT, PATCH, DELETE, and the
// secret's reveal) is named in the audit table, posting events aside.
func TestAuditCoversEveryMutatingOperation(t *testing.T) {
	t.Parallel()
	doc, err := api.GetSpec()
	require.NoError(t, err)
	var missing []string
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if method == http.MethodGet && !strings.HasSuffix(path, "/secret") ||
				strings.EqualFold(op.OperationID, "createEvent") || strings.EqualFold(op.OperationID, "createEventBatch") {
				continue
			}
			if _, ok := httpapi.AuditActions[method+" "+strings.TrimPrefix(path, "/v1")]; !ok {
				missing = append(missing, method+" "+path)
			}
		}
	}
	slices.Sort(missing)
	require.Empty(t, missing, "mutating operations the audit log does not record")
}

type auditEntry struct {
	ID    string `json:"id"`
	Actor struct {
		Type, ID, Name string
	} `json:"actor"`
	Action   string   `json:"action"`
	ObjectID *string  `json:"object_id"`
	SourceIP *string  `json:"source_ip"`
	Changed  []string `json:"changed"`
}

// TestAuditEveryChange performs every audited operation once, and a few
// that fail: each success adds exactly one entry, with its actor, action
// and object; each failure adds none; no entry holds a secret.
func TestAuditEveryChange(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	log := func() []auditEntry {
		t.Helper()
		r := b.do(b.keyA, http.MethodGet, "/v1/audit-log?limit=500", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		var page struct{ Data []auditEntry }
		require.NoError(t, json.Unmarshal(r.Body, &page))
		return page.Data
	}

	// The requests go with a key of their own, so the actor is known.
	r := b.do(b.keyA, http.MethodPost, "/v1/api-keys", map[string]any{"name": "deploy bot"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	var key struct{ ID, Key string }
	require.NoError(t, json.Unmarshal(r.Body, &key))

	seen := map[string]bool{}
	var secrets []string
	step := func(method, path string, body any, status int, action string, object func(response) string, changed ...string) response {
		t.Helper()
		before := len(log())
		r := b.do(key.Key, method, path, body)
		require.Equal(t, status, r.Status, "%s %s: %s", method, path, r.Body)
		entries := log()
		require.Len(t, entries, before+1, "%s %s: one entry", method, path)
		e := entries[0]
		require.Equal(t, action, e.Action, "%s %s", method, path)
		require.Equal(t, "api_key", e.Actor.Type)
		require.Equal(t, key.ID, e.Actor.ID)
		require.Equal(t, "deploy bot", e.Actor.Name)
		require.NotNil(t, e.ObjectID, "%s %s", method, path)
		require.Equal(t, object(r), *e.ObjectID, "%s %s", method, path)
		require.NotNil(t, e.SourceIP)
		if len(changed) > 0 {
			require.Equal(t, changed, e.Changed)
		}
		seen[action] = true
		return r
	}
	fails := func(method, path string, body any, status int) {
		t.Helper()
		before := len(log())
		r := b.do(key.Key, method, path, body)
		require.Equal(t, status, r.Status, "%s %s: %s", method, path, r.Body)
		require.Len(t, log(), before, "%s %s failed, and left no entry", method, path)
	}
	is := func(s string) func(response) string { return func(response) string { return s } }
	idOf := func(r response) string { return r.JSON(t)["id"].(string) }

	step(http.MethodPut, "/v1/consumers/cust_1", map[string]any{"name": "Cust"}, http.StatusCreated, "consumer.created", is("cust_1"))
	step(http.MethodPut, "/v1/consumers/cust_1", map[string]any{"name": "Cust 1", "alert_email": "a@cust.test"}, http.StatusOK,
		"consumer.updated", is("cust_1"), "alert_email", "name")
	link := step(http.MethodPost, "/v1/consumers/cust_1/portal", map[string]any{}, http.StatusCreated, "portal_link.created", is("cust_1"))
	secrets = append(secrets, link.JSON(t)["url"].(string))
	step(http.MethodPost, "/v1/consumers/cust_1/portal/revoke", nil, http.StatusNoContent, "portal_link.revoked", is("cust_1"))
	step(http.MethodPut, "/v1/event-types/order.created", map[string]any{"description": "An order"}, http.StatusCreated,
		"event_type.created", is("order.created"))
	step(http.MethodPut, "/v1/event-types/order.created", map[string]any{"description": "An order was placed"}, http.StatusOK,
		"event_type.updated", is("order.created"), "description")

	ep := step(http.MethodPost, "/v1/endpoints", map[string]any{"url": "https://example.com/hook"}, http.StatusCreated, "endpoint.created", idOf)
	epID := idOf(ep)
	secrets = append(secrets, ep.JSON(t)["secret"].(string))
	epPath := "/v1/endpoints/" + epID
	fails(http.MethodPatch, epPath, map[string]any{"max_in_flight": -1}, http.StatusUnprocessableEntity)
	fails(http.MethodDelete, "/v1/endpoints/"+uuid.NewString(), nil, http.StatusNotFound)
	step(http.MethodPatch, epPath, map[string]any{"description": "Orders", "max_in_flight": 5}, http.StatusOK,
		"endpoint.updated", is(epID), "description", "max_in_flight")
	step(http.MethodGet, epPath+"/secret", nil, http.StatusOK, "endpoint.secret_revealed", is(epID))
	rotated := step(http.MethodPost, epPath+"/secret/rotate", nil, http.StatusOK, "endpoint.secret_rotated", is(epID))
	secrets = append(secrets, rotated.JSON(t)["secret"].(string))
	sub := step(http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": epID, "event_types": []string{"order.*"}},
		http.StatusCreated, "subscription.created", idOf)
	step(http.MethodPost, epPath+"/test", nil, http.StatusAccepted, "endpoint.tested", is(epID))
	step(http.MethodPost, epPath+"/circuit/close", nil, http.StatusOK, "endpoint.circuit_closed", is(epID))
	fails(http.MethodPost, epPath+"/verify", nil, http.StatusConflict) // its verification is "none"
	step(http.MethodPatch, epPath, map[string]any{"verification": "challenge"}, http.StatusOK,
		"endpoint.updated", is(epID), "verification")
	step(http.MethodPost, epPath+"/verify", nil, http.StatusAccepted, "endpoint.verification_requested", is(epID))

	// Posting events is not a change of settings, and is not recorded.
	before := len(log())
	ev := b.do(key.Key, http.MethodPost, "/v1/events", map[string]any{"type": "order.created", "payload": map[string]any{"n": 1}})
	require.Equal(t, http.StatusAccepted, ev.Status, string(ev.Body))
	require.Len(t, log(), before)

	var delivery string
	require.Eventually(t, func() bool {
		return b.store.Pool().QueryRow(ctx, `SELECT id::text FROM deliveries WHERE event_id = $1`, idOf(ev)).Scan(&delivery) == nil
	}, 10e9, 20e6, "the event's delivery")
	fails(http.MethodPost, "/v1/deliveries/"+delivery+"/replay", nil, http.StatusConflict) // still pending
	step(http.MethodPost, "/v1/deliveries/"+delivery+"/retry", nil, http.StatusAccepted, "delivery.retried", is(delivery))
	_, err := b.store.Pool().Exec(ctx, `UPDATE deliveries SET status = 'dead', next_attempt_at = NULL WHERE id = $1`, delivery)
	require.NoError(t, err)
	step(http.MethodPost, "/v1/deliveries/"+delivery+"/replay", nil, http.StatusAccepted, "delivery.replayed", is(delivery))
	step(http.MethodPost, epPath+"/replay", map[string]any{}, http.StatusAccepted, "endpoint.replayed", is(epID))

	step(http.MethodDelete, "/v1/subscriptions/"+idOf(sub), nil, http.StatusNoContent, "subscription.deleted", is(idOf(sub)))
	step(http.MethodDelete, epPath, nil, http.StatusNoContent, "endpoint.deleted", is(epID))
	step(http.MethodDelete, "/v1/event-types/order.created", nil, http.StatusNoContent, "event_type.deleted", is("order.created"))
	step(http.MethodDelete, "/v1/consumers/cust_1", nil, http.StatusNoContent, "consumer.deleted", is("cust_1"))

	m := step(http.MethodPost, "/v1/members", map[string]any{"email": "ann@acme.test", "role": "viewer"}, http.StatusCreated, "member.invited", idOf)
	fails(http.MethodPost, "/v1/members", map[string]any{"email": "ANN@acme.test", "role": "admin"}, http.StatusConflict)
	step(http.MethodPatch, "/v1/members/"+idOf(m), map[string]any{"role": "admin"}, http.StatusOK, "member.updated", is(idOf(m)), "role")
	step(http.MethodDelete, "/v1/members/"+idOf(m), nil, http.StatusNoContent, "member.removed", is(idOf(m)))

	tenantID := b.do(key.Key, http.MethodGet, "/v1/tenant", nil).JSON(t)["id"].(string)
	fails(http.MethodPatch, "/v1/tenant", map[string]any{"retention": "30m"}, http.StatusUnprocessableEntity)
	step(http.MethodPatch, "/v1/tenant", map[string]any{"retention": "24h"}, http.StatusOK, "tenant.retention_updated", is(tenantID), "retention")

	// The key revokes itself last; its entry is still its own.
	step(http.MethodDelete, "/v1/api-keys/"+key.ID, nil, http.StatusNoContent, "api_key.revoked", is(key.ID))

	entries := log()
	first := entries[len(entries)-1]
	require.Equal(t, "api_key.created", first.Action, "the key's creation, made with the tenant's first key")
	require.NotEqual(t, key.ID, first.Actor.ID)
	seen[first.Action] = true

	var want []string
	for route, a := range httpapi.AuditActions {
		noun, ok := strings.CutSuffix(string(a), ".put")
		if !ok && strings.HasPrefix(route, "PUT ") { // a create-or-update the control layer names by its update
			noun, ok = strings.CutSuffix(string(a), ".updated")
		}
		if ok {
			want = append(want, noun+".created", noun+".updated")
		} else {
			want = append(want, string(a))
		}
	}
	var got []string
	for a := range seen {
		got = append(got, a)
	}
	slices.Sort(want)
	slices.Sort(got)
	require.Equal(t, want, got, "the walk performs every audited action")

	raw := fmt.Sprint(b.do(b.keyA, http.MethodGet, "/v1/audit-log?limit=500", nil).Body)
	for _, s := range append(secrets, key.Key, b.keyA) {
		require.NotContains(t, raw, s)
	}
	require.NotContains(t, raw, "whsec_")
	require.NotContains(t, raw, "sk_")
}

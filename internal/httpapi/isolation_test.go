package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTenantIsolation checks that every route taking an id answers 404 for
// another tenant's object, exactly as for an unknown one, leaves the object
// untouched, and that lists never show another tenant's objects.
func TestTenantIsolation(t *testing.T) {
	b := setup(t)
	ep := b.createEndpoint(b.keyA, nil)
	epID := ep["id"].(string)
	sub := b.do(b.keyA, http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": epID, "event_types": []string{"*"}})
	require.Equal(t, http.StatusCreated, sub.Status)
	subID := sub.JSON(t)["id"].(string)

	foreign := []struct{ method, path string }{
		{http.MethodGet, "/v1/endpoints/" + epID},
		{http.MethodPatch, "/v1/endpoints/" + epID},
		{http.MethodDelete, "/v1/endpoints/" + epID},
		{http.MethodGet, "/v1/endpoints/" + epID + "/secret"},
		{http.MethodPost, "/v1/endpoints/" + epID + "/secret/rotate"},
		{http.MethodGet, "/v1/subscriptions/" + subID},
		{http.MethodDelete, "/v1/subscriptions/" + subID},
	}
	for _, f := range foreign {
		var body any
		if f.method == http.MethodPatch {
			body = map[string]any{"description": "hijacked"}
		}
		p := requireProblem(t, b.do(b.keyB, f.method, f.path, body), http.StatusNotFound)
		require.Equal(t, "https://sluice.dev/problems/not-found", p["type"], "%s %s", f.method, f.path)
	}
	// Subscribing one's own name to a foreign endpoint is refused the same way.
	requireProblem(t, b.do(b.keyB, http.MethodPost, "/v1/subscriptions",
		map[string]any{"endpoint_id": epID, "event_types": []string{"*"}}), http.StatusNotFound)

	// Tenant A's objects are untouched, its secret unrotated.
	got := b.do(b.keyA, http.MethodGet, "/v1/endpoints/"+epID, nil).JSON(t)
	require.Equal(t, "", got["description"])
	secret := b.do(b.keyA, http.MethodGet, "/v1/endpoints/"+epID+"/secret", nil).JSON(t)
	require.Equal(t, ep["secret"], secret["secret"])
	require.Equal(t, http.StatusOK, b.do(b.keyA, http.MethodGet, "/v1/subscriptions/"+subID, nil).Status)

	// Lists, with and without filters naming tenant A's objects.
	for _, path := range []string{"/v1/endpoints", "/v1/subscriptions", "/v1/subscriptions?endpoint_id=" + epID} {
		list := b.do(b.keyB, http.MethodGet, path, nil).JSON(t)
		require.Empty(t, list["data"], path)
		list = b.do(b.keyA, http.MethodGet, path, nil).JSON(t)
		require.Len(t, list["data"], 1, path)
	}
}

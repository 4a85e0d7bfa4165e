package httpapi_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// TestDeleteRacesOtherRoutes deletes endpoints while every route that
// writes rows referring to them runs at the same time: each must answer
// as if it came before or after the delete (404 after), never 500. b.do
// fails the test on a 500.
func TestDeleteRacesOtherRoutes(t *testing.T) {
	b := setup(t)
	for range 30 {
		ep := b.createEndpoint(b.keyA, nil)["id"].(string)
		delivery := b.deliveryOf(ep)
		var wg sync.WaitGroup
		for _, req := range []struct {
			method, path string
			body         any
		}{
			{http.MethodPost, "/v1/endpoints/" + ep + "/test", nil},
			{http.MethodPost, "/v1/deliveries/" + delivery + "/replay", nil},
			{http.MethodPost, "/v1/endpoints/" + ep + "/replay", map[string]any{"status": "failed"}},
			{http.MethodPost, "/v1/endpoints/" + ep + "/circuit/close", nil},
			{http.MethodPost, "/v1/endpoints/" + ep + "/secret/rotate", nil},
			{http.MethodPatch, "/v1/endpoints/" + ep, map[string]any{"description": "x"}},
			{http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": ep, "event_types": []string{"b"}}},
			{http.MethodDelete, "/v1/endpoints/" + ep, nil},
		} {
			wg.Go(func() { b.do(b.keyA, req.method, req.path, req.body) })
		}
		wg.Wait()
	}
}

// deliveryOf subscribes the endpoint to everything, posts an event, fans
// it out and returns the delivery's id.
func (b *testBundle) deliveryOf(endpoint string) string {
	t := b.t
	r := b.do(b.keyA, http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": endpoint, "event_types": []string{"*"}})
	require.Equal(t, http.StatusCreated, r.Status)
	ev := b.do(b.keyA, http.MethodPost, "/v1/events", map[string]any{"type": "a", "payload": map[string]any{}}).JSON(t)["id"].(string)
	_, _, err := fanout.Events(t.Context(), b.store, []uuid.UUID{uuid.MustParse(ev)}, nil)
	require.NoError(t, err)
	id := uuid.MustParse(endpoint)
	page, err := b.store.ListDeliveries(t.Context(), b.tenantA.ID, sluice.DeliveryFilter{EndpointID: &id}, sluice.PageParams{Limit: 1})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	return page.Items[0].ID.String()
}

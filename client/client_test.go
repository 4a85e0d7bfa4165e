package client_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/client"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// TestRoundTrip drives Sluice through the generated client the way a
// tenant's code would: a consumer, its endpoint on a real receiver, a
// subscription, an event, the signed delivery, and the delivery's record.
// A field the server and openapi.yaml disagree on fails to decode here.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	url, key := sluiceServer(t)
	ctx := context.Background()
	c, err := client.NewClientWithResponses(url, client.WithAPIKey(key))
	require.NoError(t, err)

	cons, err := c.PutConsumerWithResponse(ctx, "cust_42", client.PutConsumerJSONRequestBody{Name: ptr("Customer 42")})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, cons.StatusCode(), string(cons.Body))
	require.Equal(t, "cust_42", cons.JSON201.UID)

	rcv := receiver.New(t)
	ep, err := c.CreateEndpointWithResponse(ctx, client.CreateEndpointJSONRequestBody{
		URL:      ptr(rcv.URL()),
		Consumer: ptr("cust_42"),
	})
	require.NoError(t, err)
	require.NotNil(t, ep.JSON201, string(ep.Body))
	require.NoError(t, rcv.SetSecret(ep.JSON201.Secret))

	sub, err := c.CreateSubscriptionWithResponse(ctx, client.CreateSubscriptionJSONRequestBody{
		EndpointID: ep.JSON201.ID,
		EventTypes: []string{"invoice.paid"},
	})
	require.NoError(t, err)
	require.NotNil(t, sub.JSON201, string(sub.Body))

	ev, err := c.CreateEventWithResponse(ctx, nil, client.CreateEventJSONRequestBody{
		Type:     "invoice.paid",
		Consumer: ptr("cust_42"),
		Payload:  map[string]any{"invoice": "in_1"},
	})
	require.NoError(t, err)
	require.NotNil(t, ev.JSON202, string(ev.Body))

	require.True(t, rcv.Await(10*time.Second, func(reqs []receiver.Request) bool { return len(reqs) == 1 }),
		"the receiver got no delivery")
	require.Eventually(t, func() bool {
		list, err := c.ListDeliveriesWithResponse(ctx, &client.ListDeliveriesParams{EventID: &ev.JSON202.ID})
		return err == nil && list.JSON200 != nil && len(list.JSON200.Data) == 1 &&
			list.JSON200.Data[0].Status == client.DeliveryStatusDelivered
	}, 10*time.Second, 20*time.Millisecond, "the delivery is not recorded delivered")

	// A problem decodes as one: an endpoint without a URL is a 422 naming it.
	bad, err := c.CreateEndpointWithResponse(ctx, client.CreateEndpointJSONRequestBody{})
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, bad.StatusCode())
	require.NotNil(t, bad.ApplicationProblemJSON422, string(bad.Body))
}

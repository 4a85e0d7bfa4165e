package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// TestDestinationShown: an endpoint delivering to a broker shows its
// destination on its page, the URL without password.
func TestDestinationShown(t *testing.T) {
	b := setup(t)
	ep, err := b.store.CreateEndpoint(context.Background(), b.tenantA.ID, sluice.EndpointSettings{
		Delivery: sluice.DeliveryPush, MaxInFlight: 1, Ordering: sluice.OrderingNone, Headers: map[string]string{},
		Options: sluice.DeliveryOptions{Destination: &sluice.Destination{Type: sluice.DestinationRedis,
			URL: "redis://app@redis.example.com:6379/0", PasswordSet: true, Stream: "hooks", MaxLen: 500}},
	}, send.NewSecret())
	require.NoError(t, err)
	br := b.browser()
	br.login(b.keyA)
	page := br.get("/endpoints/" + ep.ID.String())
	requireContains(t, page, `<dd id="destination">redis redis://app@redis.example.com:6379/0, stream hooks (trimmed to about 500 entries); password set</dd>`)
}

// TestDestinationForm: the endpoint form sets a broker destination, shows
// it back without its password, keeps the stored password when the URL
// comes back as shown, refuses a bad one under the API's rules, and turns
// the endpoint back into an HTTP one.
func TestDestinationForm(t *testing.T) {
	b := setup(t)
	br, form := b.endpointForms()
	ctx := context.Background()
	amqpForm := func(kv ...string) url.Values {
		return form(append([]string{"url", "", "destination.type", "amqp", "destination.url", "amqp://app:pw9@rabbit.example.com:5672/orders",
			"destination.exchange", "hooks", "destination.routing_key", "orders", "destination.stream", "ignored for amqp"}, kv...)...)
	}

	p := br.post("/endpoints", amqpForm("destination.url", "nats://rabbit.example.com:4222"))
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, "must use amqp or amqps for a amqp destination")

	p = br.post("/endpoints", amqpForm())
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	id := uuid.MustParse(regexp.MustCompile(`/endpoints/([0-9a-f-]{36})\?done=created`).FindStringSubmatch(p.Location())[1])
	want := &sluice.Destination{Type: sluice.DestinationAMQP, URL: "amqp://app@rabbit.example.com:5672/orders", PasswordSet: true,
		Exchange: "hooks", RoutingKey: "orders"}
	ep, err := b.store.GetEndpoint(ctx, b.tenantA.ID, id)
	require.NoError(t, err)
	require.Empty(t, ep.URL)
	require.Equal(t, want, ep.Destination)

	edit := br.get("/endpoints/" + id.String() + "/edit")
	requireContains(t, edit, `<option value="amqp" selected>`, `value="amqp://app@rabbit.example.com:5672/orders"`, `value="orders"`)
	require.NotContains(t, edit.Body, "pw9", "the password is write-only")

	// Saved back as shown: the stored password stays.
	p = br.post("/endpoints/"+id.String()+"/edit", amqpForm("destination.url", want.URL, "destination.routing_key", "invoices"))
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	ep, err = b.store.GetEndpoint(ctx, b.tenantA.ID, id)
	require.NoError(t, err)
	require.True(t, ep.Destination.PasswordSet)
	require.Equal(t, "invoices", ep.Destination.RoutingKey)

	// Redis with a max_len that is no number: the API's message.
	p = br.post("/endpoints/"+id.String()+"/edit", form("url", "", "destination.type", "redis", "destination.url", "redis://rabbit.example.com:6379",
		"destination.stream", "s", "destination.max_len", "lots"))
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, "must be a whole number from 1 to")

	// No broker, a URL: an HTTP endpoint again.
	p = br.post("/endpoints/"+id.String()+"/edit", form())
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	ep, err = b.store.GetEndpoint(ctx, b.tenantA.ID, id)
	require.NoError(t, err)
	require.Nil(t, ep.Destination)
	require.Equal(t, "https://a.test/x", ep.URL)
}

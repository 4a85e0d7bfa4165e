package control_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

func TestDestinationOption(t *testing.T) {
	t.Parallel()
	b := setupEndpoints(t)
	ctx := context.Background()
	sealedURL := func(ep sluice.Endpoint) string {
		sealed, err := store.Read(ctx, b.f.Store, (*dbq.Queries).EndpointDestinationURL,
			dbq.EndpointDestinationURLParams{TenantID: b.owner.Tenant, ID: ep.ID})
		require.NoError(t, err)
		if sealed == nil {
			return ""
		}
		open, err := b.f.Store.OpenSecret(sealed)
		require.NoError(t, err)
		return string(open)
	}
	create := func(dest string) (control.EndpointSecret, error) {
		return b.ctl.CreateEndpoint(ctx, b.owner, control.EndpointInput{Options: options("destination", dest)})
	}

	out, err := create(`{"type": "redis", "url": "redis://app:pw1@127.0.0.1:6379/2", "stream": "hooks", "max_len": 1000}`)
	require.NoError(t, err)
	ep := out.Endpoint
	require.Empty(t, ep.URL)
	require.Equal(t, &sluice.Destination{Type: "redis", URL: "redis://app@127.0.0.1:6379/2", PasswordSet: true, Stream: "hooks", MaxLen: 1000}, ep.Destination)
	require.Equal(t, "redis://app:pw1@127.0.0.1:6379/2", sealedURL(ep), "sealed whole in its column")
	read, err := json.Marshal(ep)
	require.NoError(t, err)
	require.NotContains(t, string(read), "pw1", "the password is write-only")

	// The URL shown, sent back, keeps the stored password; another URL
	// replaces it.
	back, err := json.Marshal(ep.Destination)
	require.NoError(t, err)
	got, err := b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("destination", string(back))})
	require.NoError(t, err)
	require.Equal(t, ep.Destination, got.Destination)
	require.Equal(t, "redis://app:pw1@127.0.0.1:6379/2", sealedURL(got))
	got, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("destination",
		`{"type": "nats", "url": "nats://127.0.0.1:4222", "subject": "hooks.orders"}`)})
	require.NoError(t, err)
	require.Equal(t, &sluice.Destination{Type: "nats", URL: "nats://127.0.0.1:4222", Subject: "hooks.orders"}, got.Destination)
	require.Equal(t, "nats://127.0.0.1:4222", sealedURL(got))

	// A url turns it back into an HTTP endpoint, its sealed URL gone; a
	// destination without url turns it into a broker one again.
	got, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{URL: new("http://127.0.0.1:9/hook")})
	require.NoError(t, err)
	require.Nil(t, got.Destination)
	require.Empty(t, sealedURL(got))
	got, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("destination",
		`{"type": "redis", "url": "rediss://u:p@127.0.0.1/1", "stream": "s"}`)})
	require.NoError(t, err)
	require.Empty(t, got.URL)
	require.Equal(t, "rediss://u@127.0.0.1/1", got.Destination.URL)

	// AMQP: an exchange and a routing key, either of them empty (the
	// default exchange routes by queue name); its password write-only too.
	amqpOut, err := create(`{"type": "amqp", "url": "amqp://app:pw2@127.0.0.1:5672/orders", "routing_key": "hooks"}`)
	require.NoError(t, err)
	require.Equal(t, &sluice.Destination{Type: "amqp", URL: "amqp://app@127.0.0.1:5672/orders", PasswordSet: true, RoutingKey: "hooks"}, amqpOut.Endpoint.Destination)
	require.Equal(t, "amqp://app:pw2@127.0.0.1:5672/orders", sealedURL(amqpOut.Endpoint))

	for name, tc := range map[string]struct {
		in    control.EndpointInput
		field string
	}{
		"both url and destination": {control.EndpointInput{URL: new("http://127.0.0.1:9/hook"),
			Options: options("destination", `{"type": "redis", "url": "redis://127.0.0.1", "stream": "s"}`)}, "url"},
		"unknown type":     {control.EndpointInput{Options: options("destination", `{"type": "kafka", "url": "kafka://x"}`)}, "destination.type"},
		"amqp scheme":      {control.EndpointInput{Options: options("destination", `{"type": "amqp", "url": "nats://127.0.0.1", "exchange": "x"}`)}, "destination.url"},
		"amqp with stream": {control.EndpointInput{Options: options("destination", `{"type": "amqp", "url": "amqp://127.0.0.1", "stream": "x"}`)}, "destination.stream"},
		"unknown field":    {control.EndpointInput{Options: options("destination", `{"type": "redis", "topic": "x"}`)}, "destination"},
		"no url":           {control.EndpointInput{Options: options("destination", `{"type": "redis", "stream": "s"}`)}, "destination.url"},
		"scheme of a kind": {control.EndpointInput{Options: options("destination", `{"type": "nats", "url": "redis://127.0.0.1", "subject": "s"}`)}, "destination.url"},
		"two servers":      {control.EndpointInput{Options: options("destination", `{"type": "nats", "url": "nats://a:1,b:2", "subject": "s"}`)}, "destination.url"},
		"query":            {control.EndpointInput{Options: options("destination", `{"type": "redis", "url": "redis://127.0.0.1/?addr=10.0.0.1", "stream": "s"}`)}, "destination.url"},
		"no stream":        {control.EndpointInput{Options: options("destination", `{"type": "redis", "url": "redis://127.0.0.1"}`)}, "destination.stream"},
		"negative max_len": {control.EndpointInput{Options: options("destination", `{"type": "redis", "url": "redis://127.0.0.1", "stream": "s", "max_len": -1}`)}, "destination.max_len"},
		"field of another": {control.EndpointInput{Options: options("destination", `{"type": "redis", "url": "redis://127.0.0.1", "stream": "s", "subject": "x"}`)}, "destination.subject"},
		"wildcard subject": {control.EndpointInput{Options: options("destination", `{"type": "nats", "url": "nats://127.0.0.1", "subject": "a.>"}`)}, "destination.subject"},
		"metadata host":    {control.EndpointInput{Options: options("destination", `{"type": "redis", "url": "redis://169.254.169.254", "stream": "s"}`)}, "destination.url"},
		"with auth": {control.EndpointInput{Options: options("destination", `{"type": "redis", "url": "redis://127.0.0.1", "stream": "s"}`,
			"verification", `"challenge"`)}, "verification"},
		"on a poll endpoint": {control.EndpointInput{Delivery: new(sluice.DeliveryPoll),
			Options: options("destination", `{"type": "redis", "url": "redis://127.0.0.1", "stream": "s"}`)}, "destination"},
	} {
		_, err := b.ctl.CreateEndpoint(ctx, b.owner, tc.in)
		require.Contains(t, fields(t, err), tc.field, name)
	}

	// Without private targets, a loopback broker is refused like a URL.
	strict := control.New(control.Config{Store: b.f.Store, Nudger: b.nudges, PublicURL: "https://sluice.test/"})
	_, err = strict.CreateEndpoint(ctx, b.owner, control.EndpointInput{Options: options("destination",
		`{"type": "redis", "url": "redis://127.0.0.1:6379", "stream": "s"}`)})
	require.Equal(t, []string{"destination.url"}, fields(t, err))
}

package dashboard_test

import (
	"context"
	"testing"

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

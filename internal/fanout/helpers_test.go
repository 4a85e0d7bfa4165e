package fanout_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// newEndpoint creates an endpoint of tenant A at https://example.com/path
// (max_in_flight 10) and returns its id.
func newEndpoint(t testing.TB, f storetest.Fixture, path string) uuid.UUID {
	t.Helper()
	ep, err := f.Store.CreateEndpoint(t.Context(), f.TenantA.ID, sluice.EndpointSettings{URL: "https://example.com/" + path, MaxInFlight: 10}, storetest.Secret)
	require.NoError(t, err)
	return ep.ID
}

// subscribed creates an endpoint of tenant A subscribed to typ.
func subscribed(t testing.TB, f storetest.Fixture, typ string) uuid.UUID {
	t.Helper()
	ep := newEndpoint(t, f, typ)
	_, err := f.Store.CreateSubscription(t.Context(), f.TenantA.ID, ep, []string{typ}, nil)
	require.NoError(t, err)
	return ep
}

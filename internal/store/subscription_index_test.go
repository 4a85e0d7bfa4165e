package store_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestNewSubscriptionsWaitInNoPendingList: subscriptions just created are
// in the patterns' index itself, not in a pending list of GIN's that every
// post's routing would read whole until a vacuum merged it
// (00020_subscription_patterns_no_pending_list.sql).
func TestNewSubscriptionsWaitInNoPendingList(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	for i := range 200 {
		ep := storetest.NewEndpoint(t, f, fmt.Sprintf("s/%d", i))
		_, err := f.Store.CreateSubscription(t.Context(), f.TenantA.ID, ep, []string{fmt.Sprintf("type.%d", i)}, nil)
		require.NoError(t, err)
	}
	_, err := f.Store.Pool().Exec(t.Context(), `CREATE EXTENSION IF NOT EXISTS pgstattuple`)
	require.NoError(t, err)
	var pages, tuples int64
	err = f.Store.Pool().QueryRow(t.Context(),
		`SELECT pending_pages, pending_tuples FROM pgstatginindex('subscriptions_event_types_idx')`).Scan(&pages, &tuples)
	require.NoError(t, err)
	require.Zero(t, tuples, "subscriptions pending (in %d pages)", pages)
}

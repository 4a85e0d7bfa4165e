package store_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/store"
)

// TestRoutingReadsOnlyMatchingSubscriptions: a tenant with 2,000 endpoints
// subscribed to other types (blocked-5000's setting) and 10 subscribed to
// the posted type; the routing query a post runs, in the generic plan a
// prepared statement settles on and with the settings of its transaction
// (inRoutingTx), reads the matching subscriptions only. Without the
// settings it read all 2,010 and every endpoint of the tenant.
func TestRoutingReadsOnlyMatchingSubscriptions(t *testing.T) {
	t.Parallel()
	f, _ := dueBacklog(t, 0)
	ctx := t.Context()
	subscribe := func(n int, typ string) {
		for i := range n {
			ep := newEndpoint(t, f, fmt.Sprintf("%s/%d", typ, i))
			_, err := f.Store.CreateSubscription(ctx, f.TenantA.ID, ep, []string{typ})
			require.NoError(t, err)
		}
	}
	subscribe(2000, "blocked.throttled")
	subscribe(10, "healthy.one")
	_, err := f.Store.Pool().Exec(ctx, `ANALYZE subscriptions, endpoints`)
	require.NoError(t, err)

	sql := querySQL(t, "events.sql", "SubscriptionsForEvents", "tenant_id", "patterns", "broadcast", "own", "consumers")
	args := fmt.Sprintf("'%s', '{healthy.one,healthy.*,*}', false, true, '{}'", f.TenantA.ID)
	plan := explainGeneric(t, f.Store, sql, args, store.IndexProbes...)
	t.Logf("routing one post past 2,000 other subscriptions:\n%s", plan)
	require.Contains(t, plan, "subscriptions_event_types_idx", "the patterns' index finds the subscriptions")
	require.NotRegexp(t, `Rows Removed by Filter: \d{3,}`, plan, "no other subscription is read and dropped")
}

package store_test

import (
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestRoutingReadsOnlyMatchingSubscriptions: a tenant with 2,000 endpoints
// subscribed to other types (blocked-5000's setting) and 10 subscribed to
// the posted type; the routing query a post runs, in the generic plan a
// prepared statement settles on and with the settings of its transaction
// (store.Store.InRoutingTx), reads the matching subscriptions only. Without the
// settings it read all 2,010 and every endpoint of the tenant.
func TestRoutingReadsOnlyMatchingSubscriptions(t *testing.T) {
	t.Parallel()
	f := pastOtherSubscriptions(t)
	sql := storetest.QuerySQL(t, "events.sql", "SubscriptionsForEvents", "tenant_id", "patterns", "broadcast", "own", "consumers")
	args := fmt.Sprintf("'%s', '{healthy.one,healthy.*,*}', false, true, '{}'", f.TenantA.ID)
	plan := storetest.ExplainGeneric(t, f.Store.Pool(), sql, args, store.IndexProbeSets...)
	t.Logf("routing one post past 2,000 other subscriptions:\n%s", plan)
	requireOnlyMatchingSubscriptions(t, plan, 0)
}

// TestOneStatementReadsOnlyMatchingSubscriptions is the same for the
// statement that stores, routes and fans out a small group of posts
// (InsertRoutedEvents), with the settings it runs with: it reads the
// matching subscriptions only, and makes their 10 deliveries.
func TestOneStatementReadsOnlyMatchingSubscriptions(t *testing.T) {
	t.Parallel()
	f := pastOtherSubscriptions(t)
	sql := storetest.QuerySQL(t, "events.sql", "InsertRoutedEvents", "ids", "tenant_ids", "types", "payloads",
		"broadcasts", "created_ats", "pattern_events", "patterns", "max_deliveries", "trace_contexts", "ordering_keys")
	id := uuid.Must(uuid.NewV7())
	args := fmt.Sprintf("'{%[1]s}', '{%[2]s}', '{healthy.one}', '{\"{}\"}', '{false}', '{now}', "+
		"'{%[1]s,%[1]s,%[1]s}', '{healthy.one,healthy.*,*}', 1000, NULL, NULL", id, f.TenantA.ID)
	plan := storetest.ExplainGeneric(t, f.Store.Pool(), sql, args, store.IndexProbeSets...)
	t.Logf("one post past 2,000 other subscriptions, stored, routed and fanned out:\n%s", plan)
	requireOnlyMatchingSubscriptions(t, plan, 10)
}

// pastOtherSubscriptions makes a fixture whose tenant A has 2,000
// endpoints subscribed to "blocked.throttled" and 10 to "healthy.one", with
// statistics gathered.
func pastOtherSubscriptions(t *testing.T) storetest.Fixture {
	t.Helper()
	f, _ := storetest.WithBacklog(t, 0)
	subscribe := func(n int, typ string) {
		for i := range n {
			ep := storetest.NewEndpoint(t, f, fmt.Sprintf("%s/%d", typ, i))
			_, err := f.Store.CreateSubscription(t.Context(), f.TenantA.ID, ep, []string{typ}, nil)
			require.NoError(t, err)
		}
	}
	subscribe(2000, "blocked.throttled")
	subscribe(10, "healthy.one")
	_, err := f.Store.Pool().Exec(t.Context(), `ANALYZE subscriptions, endpoints`)
	require.NoError(t, err)
	return f
}

// requireOnlyMatchingSubscriptions checks a plan that routed past
// pastOtherSubscriptions's 2,000 others, having made deliveries (rows
// inserted, when the statement makes any).
func requireOnlyMatchingSubscriptions(t *testing.T, plan string, deliveries int) {
	t.Helper()
	require.Contains(t, plan, "subscription_patterns_pkey", "the patterns' table finds the subscriptions")
	require.Regexp(t, `Index Cond: \(\(tenant_id = \S+\) AND \(pattern = \S+\)\)`, plan, "by tenant and pattern together")
	require.NotRegexp(t, `Rows Removed by Filter: \d{3,}`, plan, "no other subscription is read and dropped")
	if deliveries > 0 {
		require.Regexp(t, fmt.Sprintf(`Insert on deliveries .*actual time=[0-9.]+ rows=%d `, deliveries), plan)
	}
}

package store_test

import (
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestOneStatementFindsFilteringTenantsByProbe: whether a post's tenant has
// a filtered subscription (InsertRoutedEvents's filtering) is one probe of
// subscriptions_filtered_idx, in the generic plan and with the settings
// the statement runs with: another tenant's 500 filtered subscriptions are
// not read, and the post is routed as TestOneStatementReadsOnlyMatchingSubscriptions
// has it.
func TestOneStatementFindsFilteringTenantsByProbe(t *testing.T) {
	t.Parallel()
	f := pastOtherSubscriptions(t)
	gold, err := filter.Parse([]byte(`{"tier": "gold"}`))
	require.NoError(t, err)
	for i := range 500 {
		ep, _, err := f.Store.CreateEndpoint(t.Context(), f.TenantB.ID, sluice.EndpointSettings{
			URL: fmt.Sprintf("https://example.com/b/%d", i), MaxInFlight: 10,
		})
		require.NoError(t, err)
		_, err = f.Store.CreateFilteredSubscription(t.Context(), f.TenantB.ID, ep.ID, []string{"healthy.one"}, gold)
		require.NoError(t, err)
	}
	_, err = f.Store.Pool().Exec(t.Context(), `ANALYZE subscriptions, endpoints`)
	require.NoError(t, err)
	sql := storetest.QuerySQL(t, "events.sql", "InsertRoutedEvents", "ids", "tenant_ids", "types", "payloads",
		"broadcasts", "created_ats", "pattern_events", "patterns", "max_deliveries", "trace_contexts", "ordering_keys")
	id := uuid.Must(uuid.NewV7())
	args := fmt.Sprintf("'{%[1]s}', '{%[2]s}', '{healthy.one}', '{\"{}\"}', '{false}', '{now}', "+
		"'{%[1]s,%[1]s,%[1]s}', '{healthy.one,healthy.*,*}', 1000, NULL, NULL", id, f.TenantA.ID)
	plan := storetest.ExplainGeneric(t, f.Store.Pool(), sql, args, store.IndexProbeSets...)
	t.Logf("one post of a tenant without filters, beside another's 500 filtered subscriptions:\n%s", plan)
	require.Regexp(t, `Index Only Scan using subscriptions_filtered_idx .*\n\s+Index Cond: \(tenant_id = `, plan)
	requireOnlyMatchingSubscriptions(t, plan, 10)
}

package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestOneStatementFindsFilteringTenantsByProbe: whether a post's tenant has
// a filtered subscription (InsertRoutedEvents's filtering) is an index
// condition on subscriptions_filtered_idx, in the generic plan and with the
// settings the statement runs with: another tenant's 500 filtered
// subscriptions are not read, and the post is routed as
// TestOneStatementReadsOnlyMatchingSubscriptions has it.
func TestOneStatementFindsFilteringTenantsByProbe(t *testing.T) {
	t.Parallel()
	f := pastOtherSubscriptions(t)
	gold, err := filter.Parse([]byte(`{"tier": "gold"}`))
	require.NoError(t, err)
	for i := range 500 {
		ep, err := f.Store.CreateEndpoint(t.Context(), f.TenantB.ID, sluice.EndpointSettings{
			URL: fmt.Sprintf("https://example.com/b/%d", i), MaxInFlight: 10,
		}, storetest.Secret)
		require.NoError(t, err)
		_, err = f.Store.CreateSubscription(t.Context(), f.TenantB.ID, ep.ID, []string{"healthy.one"}, &store.Filter{JSON: []byte(gold.String()), JSONPath: gold.JSONPath()})
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
	require.Regexp(t, `Index Only Scan using subscriptions_filtered_idx .*\n\s+Index Cond: \(tenant_id = ANY`, plan)
	require.NotRegexp(t, `subscriptions_filtered_idx[^\n]*\n\s+Index Cond:[^\n]*\n\s+Heap Fetches: [1-9]`, plan)
	requireOnlyMatchingSubscriptions(t, plan, 10)
}

// TestOneStatementSettlesOnItsGenericPlan: the statement a post runs
// (Routed's InsertRoutedEvents) is planned once per connection, not once
// per post, also for a tenant with 2,010 subscriptions, whose statistics
// make a plan for one event look cheaper than the generic plan: left to
// choose, Postgres re-planned it on every call, and planning the statement
// costs more than running it.
func TestOneStatementSettlesOnItsGenericPlan(t *testing.T) {
	t.Parallel()
	f := pastOtherSubscriptions(t)
	ctx := t.Context()
	cfg := f.Store.Pool().Config()
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	st := store.New(pool, nil)
	defer st.Close()
	for range 8 {
		id := uuid.Must(uuid.NewV7())
		_, err := st.Routed().InsertRoutedEvents(ctx, dbq.InsertRoutedEventsParams{
			Ids: []uuid.UUID{id}, TenantIds: []uuid.UUID{f.TenantA.ID}, Types: []string{"healthy.one"},
			Payloads: []string{`{"n": 1}`}, Broadcasts: []bool{false}, CreatedAts: []time.Time{time.Now()},
			PatternEvents: []uuid.UUID{id, id, id}, Patterns: []string{"healthy.one", "healthy.*", "*"}, MaxDeliveries: 1000,
		})
		require.NoError(t, err)
	}
	var generic, custom int64
	// One post at a time: each takes the routed pool's one idle connection,
	// where this look at its plans runs too.
	require.NoError(t, st.RoutedPool().QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements
		WHERE statement LIKE '-- name: InsertRoutedEvents %'`).Scan(&generic, &custom))
	t.Logf("8 posts: %d generic plans, %d custom", generic, custom)
	require.Equal(t, [2]int64{8, 0}, [2]int64{generic, custom}, "generic plans, custom plans")
}

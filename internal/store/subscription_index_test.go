package store_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestNewSubscriptionsWaitInNoPendingList: subscriptions just created are
// in the GIN index of patterns itself, not in a pending list that every
// search of it would read whole until a vacuum merged it
// (00020_subscription_patterns_no_pending_list.sql). Routing searches
// subscription_patterns now; the previous release still searches the GIN
// index while an upgrade replaces its processes.
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

// TestSubscriptionPatternsFollowSubscriptions: the rows routing probes
// (subscription_patterns, 00054) are kept by the trigger on subscriptions
// through every change: one row per distinct pattern when a subscription
// is made, replaced when its patterns change, gone when it is deleted,
// also by its endpoint's deletion.
func TestSubscriptionPatternsFollowSubscriptions(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx, pool := t.Context(), f.Store.Pool()
	one, two := storetest.NewEndpoint(t, f, "one"), storetest.NewEndpoint(t, f, "two")
	a, err := f.Store.CreateSubscription(ctx, f.TenantA.ID, one, []string{"a.one", "a.*", "a.one"}, nil)
	require.NoError(t, err)
	b, err := f.Store.CreateSubscription(ctx, f.TenantA.ID, two, []string{"b.two"}, nil)
	require.NoError(t, err)
	rows := func() []string {
		t.Helper()
		r, err := pool.Query(ctx, `SELECT pattern || ' ' || CASE subscription_id WHEN $2 THEN 'a' WHEN $3 THEN 'b' END
			FROM subscription_patterns WHERE tenant_id = $1 ORDER BY 1`, f.TenantA.ID, a.ID, b.ID)
		require.NoError(t, err)
		got, err := pgx.CollectRows(r, pgx.RowTo[string])
		require.NoError(t, err)
		return got
	}
	require.Equal(t, []string{"a.* a", "a.one a", "b.two b"}, rows())

	_, err = pool.Exec(ctx, `UPDATE subscriptions SET event_types = '{c.three}' WHERE id = $1`, a.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"b.two b", "c.three a"}, rows())

	_, err = pool.Exec(ctx, `DELETE FROM endpoints WHERE id = $1`, two)
	require.NoError(t, err)
	require.Equal(t, []string{"c.three a"}, rows(), "its endpoint's deletion takes the subscription's rows")

	_, err = pool.Exec(ctx, `DELETE FROM subscriptions WHERE id = $1`, a.ID)
	require.NoError(t, err)
	require.Empty(t, rows())
}

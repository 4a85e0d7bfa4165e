package store_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestEventDeliveriesReadTwoPartialIndexes: among 40,000 deliveries, an
// event's (two first deliveries and a replay) are read through the two
// partial indexes of 00053_deliveries_of_an_event.sql, first deliveries'
// and replays', with the generic plan a prepared statement ends up with:
// no sequential scan, no row read and filtered out.
func TestEventDeliveriesReadTwoPartialIndexes(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx := t.Context()
	eps := []uuid.UUID{storetest.NewEndpoint(t, f, "a"), storetest.NewEndpoint(t, f, "b")}
	_, err := f.Store.Pool().Exec(ctx, `
		WITH ev AS (
			INSERT INTO events (id, tenant_id, type, payload)
			SELECT sluice_uuidv7(), $1, 'load', '{}' FROM generate_series(1, 20000)
			RETURNING id)
		INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, status)
		SELECT sluice_uuidv7(), $1, ev.id, ep, 'load', 'delivered' FROM ev, unnest($2::uuid[]) ep`,
		f.TenantA.ID, eps)
	require.NoError(t, err)
	var event uuid.UUID
	require.NoError(t, f.Store.Pool().QueryRow(ctx, `
		INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, status, replayed_from)
		SELECT sluice_uuidv7(), tenant_id, event_id, endpoint_id, event_type, 'pending', id
		FROM deliveries ORDER BY id OFFSET 10000 LIMIT 1
		RETURNING event_id`).Scan(&event))
	_, err = f.Store.Pool().Exec(ctx, `ANALYZE deliveries`)
	require.NoError(t, err)

	conn, err := f.Store.Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	defer func() { _, _ = conn.Exec(ctx, "DISCARD ALL") }()
	_, err = conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "PREPARE of_event AS "+storetest.QuerySQL(t, "deliveries.sql", "DeliveriesForEvent", "tenant_id", "event_id"))
	require.NoError(t, err)
	rows, err := conn.Query(ctx, fmt.Sprintf("EXPLAIN (ANALYZE, BUFFERS) EXECUTE of_event('%s', '%s')", f.TenantA.ID, event))
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	plan := strings.Join(lines, "\n")
	require.Contains(t, plan, "BitmapOr", plan)
	require.Equal(t, 2, strings.Count(plan, "Bitmap Index Scan"), "one scan of each partial index: %s", plan)
	require.NotContains(t, plan, "Seq Scan", plan)
	require.NotContains(t, plan, "Rows Removed by Filter", plan)
	require.Regexp(t, `Bitmap Heap Scan on deliveries_\d+ \S+\s+\(cost=[^)]*\) \(actual time=\S+ rows=3 loops=1\)`, plan,
		"the event's three deliveries: %s", plan)
}

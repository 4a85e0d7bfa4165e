package dispatch_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestRecordPlanDoesNotDependOnStatistics records attempts for 15 of
// 30,200 deliveries with the plan the unlocked record made when their week's
// partition held 200, as it does early in a week: Postgres keeps a
// statement's generic plan until the table's statistics change. Under the
// settings the unlocked record runs with, each delivery is one probe of its
// week's primary key and no partition is read whole; without them the plan
// made for 200 rows reads all 30,200 on every call, and so did a plan
// that read the week's event_id range off an index of event_id alone.
func TestRecordPlanDoesNotDependOnStatistics(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f, ep := storetest.WithBacklog(t, 200)
	_, err := f.Store.Pool().Exec(ctx, `ANALYZE deliveries`)
	require.NoError(t, err)
	conn, err := f.Store.Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	sql := storetest.QuerySQL(t, "dispatch.sql", "RecordOutcomes", "ids", "event_ids", "week_los", "week_his", "statuses",
		"failed", "next_attempt_ats", "ats", "status_codes", "errors", "latencies_ms", "bodies")
	for _, s := range dispatch.RecordSettings {
		_, err := conn.Exec(ctx, `SELECT set_config($1, $2, false)`, s[0], s[1])
		require.NoError(t, err)
	}
	_, err = conn.Exec(ctx, "PREPARE recorded AS "+sql)
	require.NoError(t, err)
	defer func() { _, _ = conn.Exec(ctx, "DISCARD ALL") }()

	_, err = conn.Exec(ctx, "EXPLAIN EXECUTE recorded("+recordArgs(t, f, 15)+")") // plans it, at 200 rows
	require.NoError(t, err)
	storetest.DueBacklog(t, f.Store.Pool(), f.TenantA.ID, ep, 30000)

	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) EXECUTE recorded("+recordArgs(t, f, 15)+")")
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	plan := strings.Join(lines, "\n")
	require.NotContains(t, plan, "Seq Scan on deliveries_2", plan)
	require.NotContains(t, plan, "Hash Join", plan)
	require.NotContains(t, plan, "Rows Removed by Filter", "each delivery read by its key, not found among its week's: %s", plan)
	require.Contains(t, plan, "rows=15 loops=1", "every delivery found: %s", plan)
}

// recordArgs returns RecordOutcomes's arguments, as SQL, for n deliveries
// picked at random, each delivered.
func recordArgs(t *testing.T, f storetest.Fixture, n int) string {
	t.Helper()
	rows, err := f.Store.Pool().Query(t.Context(), `SELECT id, event_id FROM deliveries ORDER BY random() LIMIT $1`, n)
	require.NoError(t, err)
	type pick struct{ ID, EventID uuid.UUID }
	picks, err := pgx.CollectRows(rows, pgx.RowToStructByPos[pick])
	require.NoError(t, err)
	var ids, events, los, his []string
	for _, p := range picks {
		lo, hi := store.WeekBounds(p.EventID)
		ids, events = append(ids, p.ID.String()), append(events, p.EventID.String())
		los, his = append(los, lo.String()), append(his, hi.String())
	}
	array := func(items []string, typ string) string { return "'{" + strings.Join(items, ",") + "}'::" + typ + "[]" }
	repeat := func(item, typ string) string { return array(slices.Repeat([]string{item}, len(picks)), typ) }
	return strings.Join([]string{
		array(ids, "uuid"), array(events, "uuid"), array(los, "uuid"), array(his, "uuid"), repeat("delivered", "text"),
		repeat("0", "int"), repeat("NULL", "timestamptz"), repeat(time.Now().UTC().Format(time.RFC3339Nano), "timestamptz"),
		repeat("200", "int"), repeat(`""`, "text"), repeat("5", "int"), repeat(`""`, "text"),
	}, ", ")
}

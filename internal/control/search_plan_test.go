package control_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// searchSQL is the query named name in queries/file with its parameters
// numbered for EXPLAIN: @tenant_id $1, @max_rows $2, and the optional ones
// (sqlc.narg) $3, $4, … in the order given.
func searchSQL(t *testing.T, file, name string, nargs ...string) string {
	q := storetest.QuerySQL(t, file, name, "tenant_id", "max_rows")
	for i, n := range nargs {
		q = strings.ReplaceAll(q, "sqlc.narg("+n+")", fmt.Sprintf("$%d", i+3))
	}
	require.NotContains(t, q, "sqlc.narg(", "every optional parameter is numbered")
	return q
}

// TestSearchPlansReadTheTenantsTimeRange: over 60,000 deliveries and
// events of tenant A spread over ten days, beside as many of tenant B's,
// each search reads the (tenant_id, created_at, id) index of each week's
// partition backwards between the range's bounds, in the order of the
// page (nothing sorted), starting at the range's end (not at the end of
// time) and stopping at the page: the generic plan, made without the
// values, as a statement prepared by the pool runs.
func TestSearchPlansReadTheTenantsTimeRange(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx := context.Background()
	epA, epB := storetest.NewEndpoint(t, f, "a"), storetest.NewEndpoint(t, f, "b")
	_, err := f.Store.Pool().Exec(ctx, `UPDATE endpoints SET tenant_id = $1 WHERE id = $2`, f.TenantB.ID, epB)
	require.NoError(t, err)
	for _, s := range []struct{ tenant, ep any }{{f.TenantA.ID, epA}, {f.TenantB.ID, epB}} {
		_, err := f.Store.Pool().Exec(ctx, `
			WITH ev AS (
				INSERT INTO events (id, tenant_id, type, payload, created_at)
				SELECT sluice_uuidv7(), $1, 'order.' || (n % 5), json_build_object('amount', n % 1000),
				       now() - (n % 14400) * interval '1 minute'
				FROM generate_series(1, 60000) n
				RETURNING id, tenant_id, type, created_at),
			d AS (
				INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, status, created_at)
				SELECT sluice_uuidv7(), tenant_id, id, $2, type, 'failed', created_at FROM ev
				RETURNING id, event_id, created_at)
			INSERT INTO delivery_attempts (delivery_id, at, status_code, latency_ms, endpoint_id, event_id)
			SELECT id, created_at, 200 + (hashtext(id::text) & 3) * 100, 1, $2, event_id FROM d`, s.tenant, s.ep)
		require.NoError(t, err)
	}
	_, err = f.Store.Pool().Exec(ctx, "ANALYZE events, deliveries, delivery_attempts")
	require.NoError(t, err)

	deliveries := searchSQL(t, "deliveries.sql", "ListDeliveries", "since", "until", "after", "endpoint_id", "event_id",
		"status", "event_type", "type_prefix", "consumer", "status_min", "status_max")
	events := strings.ReplaceAll(searchSQL(t, "events.sql", "ListEvents", "since", "until", "after", "type", "type_prefix", "consumer", "filter_path"),
		"@max_bytes", fmt.Sprint(sluice.MaxPageBytes))
	ts := func(ago time.Duration) string { return "'" + time.Now().Add(-ago).UTC().Format(time.RFC3339) + "'" }
	null := "NULL"
	args := func(vals ...string) string { return strings.Join(vals, ", ") }
	a := "'" + f.TenantA.ID.String() + "'"
	// hits bounds the buffers a page reads: a page's rows and their index
	// entries, twice over; a scan that started above the range (at the
	// end of time) would read the four days of rows above it too.
	cases := []struct {
		name, sql, args string
		hits            int
	}{
		{"deliveries of a day", deliveries, args(a, "51", ts(5*24*time.Hour), ts(4*24*time.Hour), null, null, null, null, null, null, null, null, null), 120},
		{"deliveries of a day answered 5xx", deliveries, args(a, "51", ts(5*24*time.Hour), ts(4*24*time.Hour), null, null, null, null, null, null, null, "500", "599"), 3000},
		{"deliveries of a type prefix since a day", deliveries, args(a, "51", ts(24*time.Hour), null, null, null, null, null, null, "'order.'", null, null, null), 120},
		{"events of a day", events, args(a, "51", ts(5*24*time.Hour), ts(4*24*time.Hour), null, null, null, null, null), 280},
		{"events of a day matching a payload filter", events, args(a, "51", ts(5*24*time.Hour), ts(4*24*time.Hour), null, null, null, null, `'strict $.amount < 500'`), 500},
	}
	for _, c := range cases {
		plan := storetest.ExplainGeneric(t, f.Store.Pool(), c.sql, c.args)
		t.Logf("%s:\n%s", c.name, plan)
		table := strings.Fields(c.name)[0]
		require.Regexp(t, `Index Scan Backward using `+table+`_\w+_tenant_id_created_at_id_idx`, plan, "%s: the search reads the tenant's time index", c.name)
		require.Regexp(t, `Index Cond: \(\(tenant_id = \$1\) AND \(created_at >= COALESCE\(\$3`, plan, "%s: bounded by the tenant and the time", c.name)
		require.NotRegexp(t, `Seq Scan on `+table+`_\w+ (d|ev)_\d+ `, plan, "%s: no partition is read whole", c.name)
		require.NotRegexp(t, `Sort  \(cost=[^\n]*\n\s+Sort Key: \w+\.created_at`, plan, "%s: the index gives the order", c.name)
		require.Regexp(t, `Limit  \(cost=.*\(actual .* rows=51 `, plan, "%s: a full page", c.name)
		require.NotRegexp(t, `Index Cond: [^\n]*\(created_at < `, plan, "%s: one bound above, until or the cursor, where the scan starts", c.name)
		require.Less(t, storetest.SharedHits(t, plan), c.hits, "%s: a page's worth of buffers, not the tenant's rows", c.name)
	}
}

// TestDeadLettersOfAConsumerReadItsEndpoints: a consumer's dead letters of
// a day answered 5xx (a portal's dead list), among 60,000 deliveries of
// the tenant over ten days, one in twenty dead, most of them to endpoints
// of no consumer: the page is read off each of the consumer's endpoints'
// dead deliveries in the time range (ListEndpointsDead), not off the
// tenant's time index, and holds what a plain SQL reading of the rows
// says, page after page.
func TestDeadLettersOfAConsumerReadItsEndpoints(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx := context.Background()
	pool := f.Store.Pool()
	var eps []uuid.UUID
	for i := range 4 {
		eps = append(eps, storetest.NewEndpoint(t, f, fmt.Sprint("e", i)))
	}
	_, err := pool.Exec(ctx, `INSERT INTO consumers (id, tenant_id, uid, portal_generation) VALUES (gen_random_uuid(), $1, 'c1', gen_random_uuid())`, f.TenantA.ID)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE endpoints SET consumer = 'c1' WHERE id = ANY($1)`, eps[:2])
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		WITH ev AS (
			INSERT INTO events (id, tenant_id, type, payload, created_at)
			SELECT sluice_uuidv7(), $1, 'order.' || (n % 5), '{}', now() - (n % 14400) * interval '1 minute'
			FROM generate_series(1, 60000) n
			RETURNING id, tenant_id, type, created_at),
		d AS (
			INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, status, created_at)
			SELECT sluice_uuidv7(), tenant_id, id, ($2::uuid[])[1 + (hashtext(id::text) & 3)],
			       type, CASE WHEN hashtext(id::text || 'dead') % 20 = 0 THEN 'dead' ELSE 'delivered' END, created_at
			FROM ev
			RETURNING id, event_id, endpoint_id, created_at)
		INSERT INTO delivery_attempts (delivery_id, at, status_code, latency_ms, endpoint_id, event_id)
		SELECT id, created_at, CASE WHEN hashtext(id::text) & 1 = 0 THEN 500 ELSE 404 END, 1, endpoint_id, event_id FROM d`,
		f.TenantA.ID, eps)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "ANALYZE events, deliveries, delivery_attempts")
	require.NoError(t, err)

	since, until := time.Now().Add(-5*24*time.Hour), time.Now().Add(-4*24*time.Hour)
	var want []uuid.UUID
	rows, err := pool.Query(ctx, `SELECT d.id FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id
	    JOIN delivery_attempts a ON a.delivery_id = d.id AND a.event_id = d.event_id
	    WHERE e.consumer = 'c1' AND d.status = 'dead' AND d.created_at >= $1 AND d.created_at < $2
	      AND a.status_code BETWEEN 500 AND 599
	    ORDER BY d.created_at DESC, d.id DESC`, since, until)
	require.NoError(t, err)
	want, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	require.Greater(t, len(want), 20, "a few pages of them")
	var got []uuid.UUID
	arg := dbq.ListEndpointsDeadParams{TenantID: f.TenantA.ID, Since: &since, Until: &until, Consumer: new("c1"),
		StatusMin: new(int32(500)), StatusMax: new(int32(599)), MaxRows: 10}
	for range len(want) {
		page, err := dbq.New(pool).ListEndpointsDead(ctx, arg)
		require.NoError(t, err)
		for _, d := range page {
			got = append(got, d.ID)
		}
		if len(page) < int(arg.MaxRows) {
			break
		}
		arg.After = &page[len(page)-1].ID
	}
	require.Equal(t, want, got, "pages of ten walk the consumer's dead letters of the day once, newest first")

	sql := storetest.QuerySQL(t, "deliveries.sql", "ListEndpointsDead", "tenant_id", "max_rows")
	for i, n := range []string{"since", "until", "after", "event_id", "event_type", "type_prefix", "status_min", "status_max", "endpoint_id", "consumer"} {
		sql = strings.ReplaceAll(sql, "sqlc.narg("+n+")", fmt.Sprintf("$%d", i+3))
	}
	ts := func(at time.Time) string { return "'" + at.UTC().Format(time.RFC3339) + "'" }
	plan := storetest.ExplainGeneric(t, pool, sql, strings.Join([]string{"'" + f.TenantA.ID.String() + "'", "51", ts(since), ts(until),
		"NULL", "NULL", "NULL", "NULL", "500", "599", "NULL", "'c1'"}, ", "))
	t.Logf("plan:\n%s", plan)
	require.Regexp(t, `Index Scan Backward using deliveries_\w+_endpoint_id_created_at_id_idx`, plan, "each endpoint's dead deliveries in time order")
	require.NotRegexp(t, `tenant_id_created_at_id_idx`, plan, "not the tenant's time index")
	require.Less(t, storetest.SharedHits(t, plan), 2500, "a page's worth of buffers per endpoint, not the tenant's rows")
}

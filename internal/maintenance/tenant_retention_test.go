package maintenance

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// tenantRetentionSetup is two tenants, each with an endpoint: A is to keep
// a day, B the server's retention.
type tenantRetentionSetup struct {
	f      storetest.Fixture
	epA    uuid.UUID
	epB    uuid.UUID
	oneDay int64
}

func setupTenantRetention(t *testing.T) tenantRetentionSetup {
	t.Helper()
	f := storetest.New(t)
	epB, err := f.Store.CreateEndpoint(t.Context(), f.TenantB.ID, sluice.EndpointSettings{URL: "https://example.com/b", MaxInFlight: 10}, storetest.Secret)
	require.NoError(t, err)
	return tenantRetentionSetup{f: f, epA: storetest.NewEndpoint(t, f, "a"), epB: epB.ID, oneDay: int64(24 * time.Hour / time.Second)}
}

// seed inserts n events of the tenant made age ago, each with one
// delivery to ep in status (dead ones died then too), with an attempt,
// as SQL (ids are UUIDv7 of that time), and returns the delivery ids.
func (s tenantRetentionSetup) seed(t *testing.T, tenant, ep uuid.UUID, age time.Duration, status string, n int) []uuid.UUID {
	t.Helper()
	rows, err := s.f.Store.Pool().Query(t.Context(), `
		WITH t AS (
			SELECT g, now() - $4 * interval '1 second' AS at,
			       (extract(epoch FROM now() - $4 * interval '1 second') * 1000)::bigint AS ms
			FROM generate_series(1, $5::int) g
		), ev AS (
			INSERT INTO events (id, tenant_id, type, payload, created_at)
			SELECT (lpad(to_hex(ms), 12, '0') || substr(replace(gen_random_uuid()::text, '-', ''), 13))::uuid, $1, 'old', '{}', at
			FROM t
			RETURNING id, created_at
		), d AS (
			INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, status, attempt_count, created_at, updated_at)
			SELECT (substr(replace(ev.id::text, '-', ''), 1, 12) || substr(replace(gen_random_uuid()::text, '-', ''), 13))::uuid,
			       $1, ev.id, $2, 'old', $3, 1, ev.created_at, ev.created_at
			FROM ev
			RETURNING id, event_id, endpoint_id, created_at
		), a AS (
			INSERT INTO delivery_attempts (delivery_id, at, status_code, latency_ms, endpoint_id, event_id)
			SELECT id, created_at, 200, 1, endpoint_id, event_id FROM d
		)
		SELECT id FROM d`, tenant, ep, status, int64(age/time.Second), n)
	require.NoError(t, err)
	var ids []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	require.Len(t, ids, n)
	return ids
}

func (s tenantRetentionSetup) setRetention(t *testing.T, tenant uuid.UUID, retention, dead *int64) {
	t.Helper()
	require.NoError(t, store.Exec(t.Context(), s.f.Store, (*dbq.Queries).SetTenantRetention,
		dbq.SetTenantRetentionParams{TenantID: tenant, RetentionSeconds: retention, DeadRetentionSeconds: dead}))
}

// count is the number of rows of table of the tenant (attempts: of its
// endpoints).
func (s tenantRetentionSetup) count(t *testing.T, table string, tenant uuid.UUID) int {
	t.Helper()
	var n int
	q := "SELECT count(*) FROM " + table + " WHERE tenant_id = $1"
	if table == "delivery_attempts" {
		q = "SELECT count(*) FROM delivery_attempts a JOIN endpoints e ON e.id = a.endpoint_id WHERE e.tenant_id = $1"
	}
	require.NoError(t, s.f.Store.Pool().QueryRow(t.Context(), q, tenant).Scan(&n))
	return n
}

func listed(t *testing.T, st *store.Store, tenant uuid.UUID) (deliveries, events int) {
	t.Helper()
	ctx := context.Background()
	d, err := st.ListDeliveries(ctx, tenant, sluice.DeliveryFilter{}, sluice.PageParams{Limit: 100})
	require.NoError(t, err)
	e, err := st.ListEvents(ctx, tenant, nil, nil, sluice.PageParams{Limit: 100})
	require.NoError(t, err)
	return len(d.Items), len(e.Items)
}

// TestTenantRetentionHidesAtOnceThenDeletes: a tenant keeping a day beside
// one on the server's retention. Its delivered rows older than a day
// vanish from every read as soon as it sets the day, before anything is
// deleted; its queued and dead ones stay (dead ones until its dead
// retention). The batch job then deletes them, attempts and events too,
// and the other tenant's old rows are all still there.
func TestTenantRetentionHidesAtOnceThenDeletes(t *testing.T) {
	t.Parallel()
	s := setupTenantRetention(t)
	ctx := t.Context()
	st, a, b := s.f.Store, s.f.TenantA.ID, s.f.TenantB.ID

	oldA := s.seed(t, a, s.epA, 3*24*time.Hour, "delivered", 7)
	s.seed(t, a, s.epA, time.Hour, "delivered", 2)
	deadA := s.seed(t, a, s.epA, 3*24*time.Hour, "dead", 1)
	queuedA := s.seed(t, a, s.epA, 3*24*time.Hour, "failed", 1)
	s.seed(t, b, s.epB, 3*24*time.Hour, "delivered", 5)

	d, e := listed(t, st, a)
	require.Equal(t, 11, d)
	require.Equal(t, 11, e)

	s.setRetention(t, a, &s.oneDay, nil)

	d, e = listed(t, st, a)
	require.Equal(t, 4, d, "two recent, one dead, one queued")
	require.Equal(t, 4, e, "the old events of the dead and the queued delivery are kept with them")
	_, _, err := st.GetDelivery(ctx, a, oldA[0])
	require.ErrorIs(t, err, sluice.ErrNotFound)
	old, _, err := st.GetDelivery(ctx, a, deadA[0])
	require.NoError(t, err, "a dead delivery is kept for its dead retention (the server's here)")
	_, _, err = st.GetEvent(ctx, a, old.EventID)
	require.NoError(t, err)
	_, _, err = st.GetDelivery(ctx, a, queuedA[0])
	require.NoError(t, err)
	d, e = listed(t, st, b)
	require.Equal(t, 5, d, "the other tenant's old rows are still seen")
	require.Equal(t, 5, e)
	require.Equal(t, 11, s.count(t, "deliveries", a), "nothing deleted yet")

	// A dead retention of an hour hides its dead delivery too.
	hour := int64(3600)
	s.setRetention(t, a, &s.oneDay, &hour)
	_, _, err = st.GetDelivery(ctx, a, deadA[0])
	require.ErrorIs(t, err, sluice.ErrNotFound)
	d, e = listed(t, st, a)
	require.Equal(t, 3, d)
	require.Equal(t, 3, e)

	// The job, two rows a statement.
	w, err := NewRetentionWorker(st, RetentionConfig{Delivered: 14 * 24 * time.Hour, Dead: 30 * 24 * time.Hour})
	require.NoError(t, err)
	tenants, err := store.Read(ctx, st, func(q *dbq.Queries, ctx context.Context, _ struct{}) ([]dbq.TenantRetention, error) {
		return q.TenantsWithRetention(ctx)
	}, struct{}{})
	require.NoError(t, err)
	require.Len(t, tenants, 1)
	nd, ne, err := ExpireTenant(ctx, st, tenants[0], time.Now(), 2, ExpirePace{})
	require.NoError(t, err)
	require.Equal(t, 8, nd, "seven delivered and one dead")
	require.Equal(t, 8, ne)
	require.Equal(t, 3, s.count(t, "deliveries", a))
	require.Equal(t, 3, s.count(t, "events", a))
	require.Equal(t, 3, s.count(t, "delivery_attempts", a))
	require.Equal(t, 5, s.count(t, "deliveries", b), "the other tenant's rows untouched")
	require.Equal(t, 5, s.count(t, "events", b))
	require.Equal(t, 5, s.count(t, "delivery_attempts", b))

	// A run of the whole job finds nothing more.
	r, err := w.Run(ctx, time.Now())
	require.NoError(t, err)
	require.Zero(t, r.TenantDeliveries)
	require.Zero(t, r.TenantEvents)
	require.Equal(t, 5, s.count(t, "deliveries", b))
}

// TestTenantRetentionJobRuns: the retention job deletes what a tenant's
// own retention has put out of sight.
func TestTenantRetentionJobRuns(t *testing.T) {
	t.Parallel()
	s := setupTenantRetention(t)
	ctx := t.Context()
	s.seed(t, s.f.TenantA.ID, s.epA, 2*24*time.Hour, "delivered", 3)
	s.setRetention(t, s.f.TenantA.ID, &s.oneDay, nil)
	w, err := NewRetentionWorker(s.f.Store, RetentionConfig{Delivered: 14 * 24 * time.Hour, Dead: 30 * 24 * time.Hour})
	require.NoError(t, err)
	r, err := w.Run(ctx, time.Now())
	require.NoError(t, err)
	require.Equal(t, 3, r.TenantDeliveries)
	require.Equal(t, 3, r.TenantEvents)
	require.Zero(t, s.count(t, "deliveries", s.f.TenantA.ID))
}

// TestTenantExpiryReadsOnlyItsTenant: the batch delete of a tenant's
// deliveries past its retention reads that tenant's index entries only
// (the (tenant_id, created_at, id) index of each week, the tenant and the
// time an index condition), however many old rows another tenant has; its events'
// delete does the same. (A bitmap scan reads the tenant's entries up to
// the bound, not only up to the limit: still only the tenant's.)
func TestTenantExpiryReadsOnlyItsTenant(t *testing.T) {
	t.Parallel()
	s := setupTenantRetention(t)
	a, b := s.f.TenantA.ID, s.f.TenantB.ID
	s.seed(t, a, s.epA, 3*24*time.Hour, "delivered", 20)
	s.seed(t, b, s.epB, 3*24*time.Hour, "delivered", 5000)
	s.setRetention(t, a, &s.oneDay, nil)
	before := TenantExpiryBound(dbq.TenantRetention{TenantID: a, RetentionSeconds: &s.oneDay}, time.Now())

	probes := storetest.IndexProbeSets()
	plans := map[string]string{
		"deliveries": storetest.ExplainGeneric(t, s.f.Store.Pool(),
			storetest.QuerySQL(t, "retention.sql", "ExpireTenantDeliveries", "tenant_id", "before", "max_rows"),
			"'"+a.String()+"', '"+before.String()+"', 10", probes...),
		"events": storetest.ExplainGeneric(t, s.f.Store.Pool(),
			storetest.QuerySQL(t, "retention.sql", "ExpireTenantEvents", "tenant_id", "before", "max_rows"),
			"'"+a.String()+"', '"+before.String()+"', 10", probes...),
	}
	for table, plan := range plans {
		t.Logf("%s:\n%s", table, plan)
		require.NotContains(t, plan, "Seq Scan on "+table, "%s: no scan of the table", table)
		scans := regexp.MustCompile(`(?:Bitmap Index Scan on|Index (?:Only )?Scan using) `+table+`_\w+_tenant_id_created_at_id_idx .*\(actual time=\S+ rows=(\d+) `).FindAllStringSubmatch(plan, -1)
		require.NotEmpty(t, scans, "%s: read through the (tenant_id, created_at, id) index", table)
		read := 0
		for _, m := range scans {
			n, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			read += n
		}
		require.LessOrEqual(t, read, 20, "%s: only the tenant's 20 old rows read, none of the other's 5,000", table)
		require.Regexp(t, `Index Cond: \(\(tenant_id = \$1\) AND \(created_at < .*\) AND \(id < \$2\)`, plan, "%s: the tenant and the bound are the index condition", table)
	}
	// An old event goes once it has no delivery: each event's deliveries
	// are looked up through the two partial indexes on its event_id, first
	// deliveries' and replays' (00053_deliveries_of_an_event.sql).
	plan := plans["events"]
	require.NotContains(t, plan, "Seq Scan on deliveries", plan)
	lookups := regexp.MustCompile(`(?:Scan using|Bitmap Index Scan on) (deliveries_\w+)`).FindAllStringSubmatch(plan, -1)
	require.NotEmpty(t, lookups, plan)
	for _, m := range lookups {
		require.Regexp(t, `_event_id_endpoint_id_idx1?$`, m[1], "an event's deliveries read by its event_id: %s", plan)
	}
}

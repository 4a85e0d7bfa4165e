package store_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// Sizes of TestAttemptStatsPlan: 1,000 events fanned out to 100 endpoints,
// 10 attempts per delivery, spread over a week: 1,000,000 attempts, 10,000
// per endpoint, about 1,430 of them in one endpoint's last day.
const (
	planEndpoints           = 100
	planEvents              = 1000
	planAttemptsPerDelivery = 10
)

// TestAttemptStatsPlan: with 1,000,000 attempts of 100 endpoints over a
// week, the chart query of one endpoint's last day reads only that
// endpoint's index entries in the day (an index or bitmap index scan of
// delivery_attempts_endpoint_at_idx returning as many rows as the day
// holds, none filtered out, no sequential scan, no look-up of deliveries
// made: the tenant has no retention of its own), before and after the
// table has statistics; and the buckets add up.
func TestAttemptStatsPlan(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx := t.Context()
	ids := make([]uuid.UUID, planEndpoints)
	for i := range ids {
		ids[i] = storetest.NewEndpoint(t, f, "h"+strconv.Itoa(i))
	}
	now := time.Now().UTC().Truncate(time.Minute)
	start := time.Now()
	tag, err := f.Store.Pool().Exec(ctx, `
		WITH ev AS (
			INSERT INTO events (id, tenant_id, type, payload)
			SELECT sluice_uuidv7(), $1, 'load', '{}' FROM generate_series(1, $3::int)
			RETURNING id),
		d AS (
			INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, status)
			SELECT sluice_uuidv7(), $1, ev.id, ep, 'load', 'delivered' FROM ev, unnest($2::uuid[]) ep
			RETURNING id, endpoint_id, event_id)
		INSERT INTO delivery_attempts (delivery_id, endpoint_id, event_id, at, status_code, latency_ms)
		SELECT d.id, d.endpoint_id, d.event_id, $4::timestamptz - random() * interval '7 days',
		       (ARRAY[200, 200, 200, 200, 200, 204, 500, 503, 429, NULL])[1 + floor(random() * 10)::int],
		       (random() * 2000)::int
		FROM d, generate_series(1, $5::int)`,
		f.TenantA.ID, ids, planEvents, now, planAttemptsPerDelivery)
	require.NoError(t, err)
	require.EqualValues(t, planEndpoints*planEvents*planAttemptsPerDelivery, tag.RowsAffected())
	t.Logf("inserted %d attempts in %s", tag.RowsAffected(), time.Since(start).Round(time.Millisecond))

	ep := ids[planEndpoints/2]
	since, until := now.Add(-24*time.Hour), now
	var want int64
	require.NoError(t, f.Store.Pool().QueryRow(ctx,
		`SELECT count(*) FROM delivery_attempts WHERE endpoint_id = $1 AND at >= $2 AND at < $3`, ep, since, until).Scan(&want))
	require.Greater(t, want, int64(1000), "the endpoint has attempts in its last day")

	requireIndexPlan(t, f.Store, f.TenantA.ID, ep, since, until, want, "no statistics")
	_, err = f.Store.Pool().Exec(ctx, "ANALYZE delivery_attempts")
	require.NoError(t, err)
	requireIndexPlan(t, f.Store, f.TenantA.ID, ep, since, until, want, "after ANALYZE")

	var buckets []dbq.AttemptStatsRow
	require.NoError(t, f.Store.InTx(ctx, func(tx store.Tx) error {
		buckets, err = tx.Q.AttemptStats(ctx, dbq.AttemptStatsParams{
			TenantID: f.TenantA.ID, EndpointID: ep, Since: since, Until: until, BucketSeconds: int32(30 * time.Minute / time.Second),
		})
		return err
	}))
	require.LessOrEqual(t, len(buckets), 48)
	var got int64
	for _, b := range buckets {
		require.False(t, b.Bucket.Before(since))
		require.Zero(t, b.Bucket.Sub(since)%(30*time.Minute), "buckets start on the half hour from since")
		require.LessOrEqual(t, b.P50Ms, b.P95Ms)
		got += b.Delivered + b.Throttled + b.Failed
	}
	require.Equal(t, want, got, "the buckets hold every attempt of the day")
}

var (
	indexNodeRe = regexp.MustCompile(`(?:Bitmap Index Scan on|Index Scan using|Index Only Scan using) delivery_attempts_(?:\d{8}|kept)_endpoint_id_at_\w*idx .*\(actual time=\S+ rows=(\d+) `)
	execTimeRe  = regexp.MustCompile(`Execution Time: ([\d.]+) ms`)
)

// requireIndexPlan runs EXPLAIN ANALYZE of the day chart of an endpoint and
// requires it to read want index entries and nothing else.
func requireIndexPlan(t *testing.T, st *store.Store, tenant, ep uuid.UUID, since, until time.Time, want int64, when string) {
	t.Helper()
	plan := storetest.ExplainAnalyze(t, st.Pool(),
		storetest.QuerySQL(t, "attempt_stats.sql", "AttemptStats", "bucket_seconds", "since", "endpoint_id", "until", "tenant_id"),
		int32(1800), since, ep, until, tenant)
	t.Logf("day chart of 1 endpoint among %d, 1,000,000 attempts, %s:\n%s", planEndpoints, when, plan)
	// (A day's empty partition may be "scanned": it has no pages.)
	require.NotRegexp(t, `Seq Scan on [^\n]*\(actual time=\S+ rows=[1-9]`, plan, "nothing is read sequentially")
	require.NotContains(t, plan, "hashed SubPlan", "a delivery is looked up by its key, never by hashing the tenant's")
	for _, line := range strings.Split(plan, "\n") {
		if strings.Contains(line, " on deliveries") || strings.Contains(line, "using deliveries") {
			require.Contains(t, line, "(never executed)", "no delivery is looked up: %s", line)
		}
	}
	require.NotContains(t, plan, "Rows Removed by", "no entry read is thrown away")
	// Each day's partition has its copy of delivery_attempts_endpoint_at_idx.
	ms := indexNodeRe.FindAllStringSubmatch(plan, -1)
	require.NotEmpty(t, ms, "the query reads delivery_attempts_endpoint_at_idx")
	var read int64
	for _, m := range ms {
		n, err := strconv.ParseInt(m[1], 10, 64)
		require.NoError(t, err)
		read += n
	}
	require.Equal(t, want, read, "the index scans read exactly the endpoint's attempts of the day")
	if et := execTimeRe.FindStringSubmatch(plan); et != nil {
		t.Logf("day chart query, %s: %s ms for %d of %d attempts", when, et[1], want, planEndpoints*planEvents*planAttemptsPerDelivery)
	}
}

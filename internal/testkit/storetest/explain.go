package storetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/stretchr/testify/require"
)

// What plan tests stand on: the plan Postgres runs a statement with, and
// a backlog of due deliveries to run it against.

// QuerySQL returns the query named name in queries/file as sqlc reads it,
// with its named parameters (params, in order) numbered $1, $2, …: the SQL
// a plan test EXPLAINs.
func QuerySQL(t testing.TB, file, name string, params ...string) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(here), "../../../queries", file))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(raw), "-- name: "+name+" ")
	require.True(t, ok, "%s is in queries/%s", name, file)
	_, rest, _ = strings.Cut(rest, "\n") // past the ":many" of the name line
	q, _, _ := strings.Cut(rest, "-- name:")
	var pairs []string
	for i, p := range params {
		pairs = append(pairs, "@"+p, fmt.Sprintf("$%d", i+1))
	}
	return strings.NewReplacer(pairs...).Replace(q)
}

// ExplainAnalyze runs sql under EXPLAIN (ANALYZE, BUFFERS) and returns the
// plan as text.
func ExplainAnalyze(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), "EXPLAIN (ANALYZE, BUFFERS) "+sql, args...)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

// ExplainGeneric runs sql, prepared, under EXPLAIN (ANALYZE, BUFFERS) with
// Postgres's generic plan (the one made without knowing the values) and
// returns the plan as text; args are the EXECUTE's arguments, as SQL, and
// settings are statements run on the connection first.
func ExplainGeneric(t testing.TB, pool *pgxpool.Pool, sql, args string, settings ...string) string {
	t.Helper()
	ctx := context.Background()
	pooled, err := pool.Acquire(ctx)
	require.NoError(t, err)
	// The settings and the prepared statement stay with the connection,
	// which is closed rather than returned to the pool.
	conn := pooled.Hijack()
	defer conn.Close(ctx)
	for _, set := range append([]string{"SET plan_cache_mode = force_generic_plan"}, settings...) {
		_, err = conn.Exec(ctx, set)
		require.NoError(t, err)
	}
	_, err = conn.Exec(ctx, "PREPARE explained AS "+sql)
	require.NoError(t, err)
	rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) EXECUTE explained("+args+")")
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

// SharedHits is the number of shared buffers a whole plan touched (its top
// line's Buffers).
func SharedHits(t testing.TB, plan string) int {
	t.Helper()
	m := regexp.MustCompile(`Buffers: shared hit=(\d+)`).FindStringSubmatch(plan)
	require.NotNil(t, m, "buffers in the plan")
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

// DueBacklog adds to the endpoint of tenantID n deliveries due within the
// last hour, each of an event of its own, inserted by SQL with no
// statistics gathered.
func DueBacklog(t testing.TB, pool *pgxpool.Pool, tenantID, endpointID uuid.UUID, n int) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		WITH ev AS (
			INSERT INTO events (id, tenant_id, type, payload)
			SELECT sluice_uuidv7(), $1, 'backlog', '{}' FROM generate_series(1, $3::int)
			RETURNING id)
		INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, next_attempt_at)
		SELECT sluice_uuidv7(), $1, ev.id, $2, 'backlog', now() - random() * interval '1 hour' FROM ev`,
		tenantID, endpointID, n)
	require.NoError(t, err)
}

// WithBacklog makes a fixture with one endpoint holding n deliveries due
// within the last hour, each of an event of its own, inserted by SQL with
// no statistics gathered: the setting of the plan tests.
func WithBacklog(t testing.TB, n int) (Fixture, uuid.UUID) {
	t.Helper()
	f := New(t)
	ep := NewEndpoint(t, f, "h")
	DueBacklog(t, f.Store.Pool(), f.TenantA.ID, ep, n)
	return f, ep
}

// NewEndpoint creates an endpoint of tenant A at https://example.com/path
// (max_in_flight 10) and returns its id.
func NewEndpoint(t testing.TB, f Fixture, path string) uuid.UUID {
	t.Helper()
	ep, err := f.Store.CreateEndpoint(t.Context(), f.TenantA.ID, sluice.EndpointSettings{URL: "https://example.com/" + path, MaxInFlight: 10}, Secret)
	require.NoError(t, err)
	return ep.ID
}

// IndexProbeSets are store.IndexProbes as statements for ExplainGeneric.
func IndexProbeSets() []string {
	sets := make([]string, len(store.IndexProbes))
	for i, s := range store.IndexProbes {
		sets[i] = fmt.Sprintf("SET %s = %s", s[0], s[1])
	}
	return sets
}

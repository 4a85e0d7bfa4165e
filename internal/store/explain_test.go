package store_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// querySQL returns the query named name in queries/file as sqlc reads it,
// with its named parameters (params, in order) numbered $1, $2, …: the SQL
// the plan tests EXPLAIN.
func querySQL(t *testing.T, file, name string, params ...string) string {
	t.Helper()
	raw, err := os.ReadFile("../../queries/" + file)
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

// explainAnalyze runs sql under EXPLAIN (ANALYZE, BUFFERS) and returns the
// plan as text.
func explainAnalyze(t *testing.T, st *store.Store, sql string, args ...any) string {
	t.Helper()
	rows, err := st.Pool().Query(context.Background(), "EXPLAIN (ANALYZE, BUFFERS) "+sql, args...)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

// explainGeneric runs sql, prepared, under EXPLAIN (ANALYZE, BUFFERS) with
// Postgres's generic plan (the one made without knowing the values) and
// returns the plan as text; args are the EXECUTE's arguments, as SQL, and
// settings are statements run on the connection first.
func explainGeneric(t *testing.T, st *store.Store, sql, args string, settings ...string) string {
	t.Helper()
	ctx := context.Background()
	pooled, err := st.Pool().Acquire(ctx)
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

// dueBacklog makes a fixture with one endpoint holding n deliveries due
// within the last hour, each of an event of its own, inserted by SQL with
// no statistics gathered: the setting of the plan tests.
func dueBacklog(t *testing.T, n int) (storetest.Fixture, uuid.UUID) {
	t.Helper()
	f := storetest.New(t)
	ep := newEndpoint(t, f, "h")
	storetest.DueBacklog(t, f.Store.Pool(), f.TenantA.ID, ep, n)
	return f, ep
}

// newEndpoint creates an endpoint of tenant A at https://example.com/path
// (max_in_flight 10) and returns its id.
func newEndpoint(t testing.TB, f storetest.Fixture, path string) uuid.UUID {
	t.Helper()
	ep, _, err := f.Store.CreateEndpoint(t.Context(), f.TenantA.ID, sluice.EndpointSettings{URL: "https://example.com/" + path, MaxInFlight: 10})
	require.NoError(t, err)
	return ep.ID
}

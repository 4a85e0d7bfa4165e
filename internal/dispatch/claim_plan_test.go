package dispatch_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestClaimPlanDoesNotDependOnTheBacklog: with 100,000 due deliveries on one
// endpoint in a table Postgres has no statistics for, the claim reads its
// index in order and stops at the limit: no sort of the backlog, no join of
// every due row to its event.
func TestClaimPlanDoesNotDependOnTheBacklog(t *testing.T) {
	t.Parallel()
	f, ep := storetest.WithBacklog(t, 100000)

	claim := claimSQL(t)
	// Group claims run the generic plan held to index probes
	// (DB.groupClaim), made once per connection; the plan made for the
	// values is what it would be without.
	plans := map[string]string{
		"planned for its values": storetest.ExplainAnalyze(t, f.Store.Pool(), claim, []uuid.UUID{ep}, []int32{10}, []time.Time{{}}, []uuid.UUID{{}}),
		"generic":                storetest.ExplainGeneric(t, f.Store.Pool(), claim, claimArgs(ep, 10, dispatch.Position{}), storetest.IndexProbeSets()...),
	}
	for name, plan := range plans {
		t.Logf("claim over a 100,000-delivery backlog, no statistics, %s:\n%s", name, plan)
		// Each week's partition has its own copy of the claim index; a Merge
		// Append reads them in order, side by side.
		require.Contains(t, plan, "_endpoint_id_next_attempt_at_id_idx", "%s: the claim reads the claim index", name)
		require.NotRegexp(t, `Sort  \(cost`, plan, "%s: the index gives the order; nothing is sorted", name)
		require.Regexp(t, `Index Scan using deliveries_\d{8}_endpoint_id_next_attempt_at_id_idx on deliveries_\d{8} d_\d+ .*\(actual .* rows=10 `, plan,
			"%s: ten index entries read for ten rows", name)
	}
}

// TestClaimAfterAPositionSkipsWhatWasDelivered: in a backlog whose first
// half has been delivered (its index entries left for vacuum), a claim
// that starts after the last delivered one goes straight to the next due:
// its index scan starts at the position (an index condition, not a filter)
// and reads a few pages where a claim from the front reads hundreds.
func TestClaimAfterAPositionSkipsWhatWasDelivered(t *testing.T) {
	t.Parallel()
	f, ep := storetest.WithBacklog(t, 40000)
	var last dispatch.Position
	err := f.Store.Pool().QueryRow(t.Context(), `
		WITH done AS (
			UPDATE deliveries SET status = 'delivered'
			WHERE id IN (SELECT id FROM deliveries WHERE endpoint_id = $1 ORDER BY next_attempt_at, id LIMIT 20000)
			RETURNING next_attempt_at, id)
		SELECT next_attempt_at, id FROM done ORDER BY next_attempt_at DESC, id DESC LIMIT 1`, ep).Scan(&last.NextAttemptAt, &last.ID)
	require.NoError(t, err)

	claim := claimSQL(t)
	// The first claim from the front marks the entries it steps over dead;
	// the second is the one measured.
	probes := storetest.IndexProbeSets()
	_ = storetest.ExplainGeneric(t, f.Store.Pool(), claim, claimArgs(ep, 10, dispatch.Position{}), probes...)
	fromFront := storetest.ExplainGeneric(t, f.Store.Pool(), claim, claimArgs(ep, 10, dispatch.Position{}), probes...)
	afterLast := storetest.ExplainGeneric(t, f.Store.Pool(), claim, claimArgs(ep, 10, last), probes...)
	t.Logf("from the front:\n%s\nafter the last delivered:\n%s", fromFront, afterLast)
	require.Contains(t, afterLast, "(ROW(next_attempt_at, id) > ROW(", "the position bounds the index scan")
	front, after := storetest.SharedHits(t, fromFront), storetest.SharedHits(t, afterLast)
	require.Less(t, after*5, front, "after the position: %d buffers; from the front: %d", after, front)
}

// claimSQL is ClaimDueDeliveries with its parameters numbered, for EXPLAIN.
func claimSQL(t *testing.T) string {
	return storetest.QuerySQL(t, "dispatch.sql", "ClaimDueDeliveries", "endpoint_ids", "max_rows", "after_ats", "after_ids")
}

// claimArgs are claimSQL's arguments, as SQL, for a claim of n from ep after
// the position.
func claimArgs(ep uuid.UUID, n int, after dispatch.Position) string {
	return fmt.Sprintf(`'{%s}', '{%d}', '{"%s"}', '{%s}'`, ep, n, after.NextAttemptAt.UTC().Format("2006-01-02 15:04:05.999999Z07:00"), after.ID)
}

package store_test

import (
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestClaimPlanDoesNotDependOnTheBacklog: with 100,000 due deliveries on one
// endpoint in a table Postgres has no statistics for, the claim reads its
// index in order and stops at the limit: no sort of the backlog, no join of
// every due row to its event.
func TestClaimPlanDoesNotDependOnTheBacklog(t *testing.T) {
	t.Parallel()
	f, ep := dueBacklog(t, 100000)

	claim := querySQL(t, "dispatch.sql", "ClaimDueDeliveries", "endpoint_ids", "max_rows")
	// A claim in a dispatch step's transaction is planned for its values;
	// group-committed claims run the generic plan (store.genericPlan).
	plans := map[string]string{
		"planned for its values": explainAnalyze(t, f.Store, claim, []uuid.UUID{ep}, []int32{10}),
		"generic":                explainGeneric(t, f.Store, claim, fmt.Sprintf("'{%s}', '{10}'", ep)),
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

package dispatch_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestFIFOHeadsPlanReadsOneEntryPerLine: a FIFO endpoint with 60,000
// queued deliveries in 3 lines, in a table Postgres has no statistics for,
// and 20,000 of another endpoint: reading the heads of its lines reads the
// FIFO index a few entries per line (a skip scan), not the backlog, in the
// generic plan a claim step runs with its settings.
func TestFIFOHeadsPlanReadsOneEntryPerLine(t *testing.T) {
	t.Parallel()
	f, ep := storetest.WithBacklog(t, 60000)
	other := storetest.NewEndpoint(t, f, "other")
	storetest.DueBacklog(t, f.Store.Pool(), f.TenantA.ID, other, 20000)
	_, err := f.Store.Pool().Exec(t.Context(), `
		UPDATE endpoints SET ordering = 'fifo' WHERE id = $1;`, ep)
	require.NoError(t, err)
	_, err = f.Store.Pool().Exec(t.Context(), `
		UPDATE deliveries SET fifo_position = event_id, ordering_key = 'k' || (abs(hashtext(id::text)) % 3)
		WHERE endpoint_id = $1`, ep)
	require.NoError(t, err)

	sql := storetest.QuerySQL(t, "fifo.sql", "FIFOHeads", "endpoint_id")
	plan := storetest.ExplainGeneric(t, f.Store.Pool(), sql, fmt.Sprintf("'%s'", ep), storetest.IndexProbeSets()...)
	t.Logf("line heads over a 60,000-delivery backlog in 3 lines, no statistics:\n%s", plan)
	require.Contains(t, plan, "fifo_position_idx", "the heads are read from the FIFO index")
	require.NotRegexp(t, `Seq Scan on deliveries`, plan, "no scan of the deliveries")
	require.Regexp(t, `(?m)^\s+->  .*actual .* rows=3 loops=1`, plan, "three heads")
	require.Less(t, storetest.SharedHits(t, plan), 100, "a few index pages per line, not the backlog")
}

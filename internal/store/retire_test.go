package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/storetest"
)

// TestRetireWeekLocksNoOtherWeek: retiring a week waits for no other week's
// partitions, so a session holding one of them (autovacuum does, for
// seconds at a time) does not make it time out. LOCK TABLE ONLY a, b, c
// locks only a without recursing; each of b and c needs its own ONLY.
func TestRetireWeekLocksNoOtherWeek(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := storetest.New(t)
	old := time.Now().AddDate(0, 0, -60)
	created, err := f.Store.EnsureWeekPartitions(ctx, old)
	require.NoError(t, err)
	require.True(t, created)

	now := store.PartitionWeek(time.Now()).Format("20060102")
	busy, err := f.Store.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = busy.Rollback(ctx) }()
	for _, table := range []string{"events", "deliveries", "delivery_attempts"} {
		_, err = busy.Exec(ctx, "LOCK TABLE "+table+"_"+now+" IN SHARE UPDATE EXCLUSIVE MODE") // what autovacuum takes
		require.NoError(t, err)
	}

	retired, err := f.Store.RetireWeek(ctx, old)
	require.NoError(t, err, "this week's partitions are busy; the old week's are not")
	require.True(t, retired)
}

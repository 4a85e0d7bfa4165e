package maintenance

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestRetireWeekLocksNoOtherWeek: retiring a week waits for no other week's
// partitions, so a session holding one of them (autovacuum does, for
// seconds at a time) does not make it time out. LOCK TABLE ONLY a, b, c
// locks only a without recursing; each of b and c needs its own ONLY.
func TestRetireWeekLocksNoOtherWeek(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f, old := withOldWeek(t)

	now := store.PartitionWeek(time.Now()).Format("20060102")
	busy, err := f.Store.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = busy.Rollback(ctx) }()
	for _, table := range []string{"events", "deliveries", "delivery_attempts"} {
		_, err = busy.Exec(ctx, "LOCK TABLE "+table+"_"+now+" IN SHARE UPDATE EXCLUSIVE MODE") // what autovacuum takes
		require.NoError(t, err)
	}

	retired, err := RetireWeek(ctx, f.Store, old)
	require.NoError(t, err, "this week's partitions are busy; the old week's are not")
	require.True(t, retired)
}

// TestDroppingExpiredTablesWaitsForNoPost: an expired week's tables go
// while a post holds its locks (KEY SHARE on an endpoint and a tenant, as
// its routing and foreign keys take them). Only dropping a table's foreign
// keys, which removes no files, waits for posts; a DROP TABLE that held
// endpoints and tenants exclusively kept every post and dispatch step
// waiting while its commit removed the table's files.
func TestDroppingExpiredTablesWaitsForNoPost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f, old := withOldWeek(t)
	retired, err := RetireWeek(ctx, f.Store, old)
	require.NoError(t, err)
	require.True(t, retired)
	_, err = keepRetired(ctx, f.Store, time.Now().AddDate(0, 0, -30))
	require.NoError(t, err)

	dropWhilePosting := func() (string, error) {
		post, err := f.Store.Pool().Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = post.Rollback(ctx) }()
		_, err = post.Exec(ctx, `SELECT 1 FROM endpoints LIMIT 1 FOR KEY SHARE`)
		require.NoError(t, err)
		_, err = post.Exec(ctx, `SELECT 1 FROM tenants WHERE id = $1 FOR KEY SHARE`, f.TenantA.ID)
		require.NoError(t, err)
		return dropExpiredOne(ctx, f.Store)
	}
	isTable := regexp.MustCompile(`^expired_(events|deliveries|delivery_attempts)_[0-9]{8}$`)
	var tables, keys int
	for range 100 {
		name, err := dropWhilePosting()
		if err == nil {
			if name == "" {
				break
			}
			if isTable.MatchString(name) {
				tables++
			}
			continue
		}
		require.True(t, LockNotAvailable(err), "%v", err)
		name, err = dropExpiredOne(ctx, f.Store)
		require.NoError(t, err)
		require.True(t, strings.HasSuffix(name, " foreign keys"), "only dropping foreign keys may wait for a post; dropping %s did", name)
		keys++
	}
	require.Equal(t, 3, tables, "the week's three tables dropped while a post held its locks")
	require.Equal(t, 1, keys, "the foreign key of its deliveries (to endpoints) dropped apart")
}

// withOldWeek makes a fixture with the partitions of a week 60 days back,
// and returns a time in that week.
func withOldWeek(t *testing.T) (storetest.Fixture, time.Time) {
	t.Helper()
	f := storetest.New(t)
	old := time.Now().AddDate(0, 0, -60)
	created, err := ensureWeekPartitions(t.Context(), f.Store, old)
	require.NoError(t, err)
	require.True(t, created)
	return f, old
}

package store_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestPartitionWeekMatchesTheDatabase: Go's PartitionWeek and the
// database's sluice_week_start_ms agree on where a week starts (Monday
// 00:00 UTC), at and around week boundaries.
func TestPartitionWeekMatchesTheDatabase(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	monday := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Time{monday, monday.Add(-time.Millisecond), monday.Add(time.Millisecond),
		monday.Add(3*24*time.Hour + 5*time.Hour), time.Now()} {
		var ms int64
		require.NoError(t, f.Store.Pool().QueryRow(t.Context(), `SELECT sluice_week_start_ms($1)`, at.UnixMilli()).Scan(&ms))
		require.Equal(t, store.PartitionWeek(at), time.UnixMilli(ms).UTC(), "week of %s", at)
		require.Equal(t, time.Monday, store.PartitionWeek(at).Weekday())
	}
}

// TestWeekBoundsMatchTheDatabase: the week bounds RecordOutcomes is given
// for each event id are sluice_week_lo's and sluice_week_hi's, for UUIDv7s
// at and around a week boundary and for random ids (whose first 48 bits are
// no time Sluice made), so a delivery is always looked for in the partition
// it is in.
func TestWeekBoundsMatchTheDatabase(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	monday := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	var ids []uuid.UUID
	for _, at := range []time.Time{monday, monday.Add(-time.Millisecond), monday.Add(time.Millisecond), time.Now()} {
		id, err := uuid.NewV7()
		require.NoError(t, err)
		ms := at.UnixMilli()
		for i := range 6 {
			id[i] = byte(ms >> (40 - 8*i))
		}
		ids = append(ids, id)
	}
	ids = append(ids, uuid.New(), uuid.MustParse("fffffffe-0000-4000-8000-000000000000"))
	for _, id := range ids {
		lo, hi := store.WeekBounds(id)
		var dbLo, dbHi uuid.UUID
		// Past 48 bits sluice_week_hi has no uuid to return; Go's is the largest.
		err := f.Store.Pool().QueryRow(t.Context(), `SELECT sluice_week_lo($1),
			CASE WHEN sluice_week_start_ms(sluice_uuid_ms($1)) + 604800000 >= 2^48 THEN $2 ELSE sluice_week_hi($1) END`,
			id, uuid.Max).Scan(&dbLo, &dbHi)
		require.NoError(t, err)
		require.Equal(t, dbLo, lo, "lower bound of %s", id)
		require.Equal(t, dbHi, hi, "upper bound of %s", id)
		require.True(t, bytes.Compare(lo[:], id[:]) <= 0 && bytes.Compare(id[:], hi[:]) < 0, "%s within [%s, %s)", id, lo, hi)
	}
}

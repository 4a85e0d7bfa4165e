package maintenance

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// The partition changes of the retention job. Events, deliveries and
// attempts live in one partition per week of their event, plus a default
// partition (*_kept) for what outlives its week (00014_time_partitions.sql,
// store.PartitionWeek). Each change runs in a transaction of its own.

// PartitionLockTimeout bounds how long creating or retiring a week waits
// for its locks. Retiring a week locks the three tables (a detach needs
// that), and while it waits every query behind it waits too, so it gives
// up soon and the job tries again (LockRetries).
const PartitionLockTimeout = 20 * time.Millisecond

// ensureWeekPartitions creates the partitions of the week holding t, if
// missing, and reports whether it created them.
func ensureWeekPartitions(ctx context.Context, st *store.Store, t time.Time) (bool, error) {
	what := "create the partitions of the week of " + store.PartitionWeek(t).Format(time.DateOnly)
	return partitionTx(ctx, st, what, func(q *dbq.Queries) (bool, error) { return q.EnsureWeekPartitions(ctx, t) })
}

// partitionWeeks returns the weeks that have partitions, oldest first,
// each as its start.
func partitionWeeks(ctx context.Context, st *store.Store) ([]time.Time, error) {
	var rows []pgtype.Date
	err := st.InTx(ctx, func(tx store.Tx) error {
		var err error
		rows, err = tx.Q.PartitionWeeks(ctx)
		if err != nil {
			return fmt.Errorf("partition weeks: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list partition weeks: %w", err)
	}
	weeks := make([]time.Time, len(rows))
	for i, d := range rows {
		weeks[i] = time.Date(d.Time.Year(), d.Time.Month(), d.Time.Day(), 0, 0, 0, 0, time.UTC)
	}
	return weeks, nil
}

// Retiring a week is three steps (00018_retired_weeks.sql): RetireWeek
// detaches its partitions under the tables' locks, keepRetired moves out
// what must outlive it without them, and dropExpired drops what is left,
// one index or table a call.

// RetireWeek detaches the partitions of the week starting at week and
// renames them retired_*, and reports whether the week had partitions.
// Its locks hold up every statement on the three tables, for a few ms
// whatever the week holds.
func RetireWeek(ctx context.Context, st *store.Store, week time.Time) (bool, error) {
	start := store.PartitionWeek(week)
	return partitionTx(ctx, st, "retire the week of "+start.Format(time.DateOnly), func(q *dbq.Queries) (bool, error) {
		return q.RetireWeek(ctx, pgtype.Date{Time: start, Valid: true})
	})
}

// keepRetired moves, from every retired week, its deliveries still queued,
// those that died at or after deadBefore, and their attempts and events
// into the kept partitions, marks the weeks expired, and returns how many
// deliveries it kept.
func keepRetired(ctx context.Context, st *store.Store, deadBefore time.Time) (int64, error) {
	return partitionTx(ctx, st, "keep the retired weeks' deliveries", func(q *dbq.Queries) (int64, error) {
		return q.KeepRetired(ctx, deadBefore)
	})
}

// dropExpiredOne drops one index, one table's foreign keys or one table of
// the expired weeks, in a transaction of its own, and returns what it
// dropped, or "" when none is left. Its commit removes that relation's
// files; one call at a time, paced by its caller, spreads that work out.
// Only dropping foreign keys locks the tables they reference (endpoints,
// tenants), and it removes no files, so delivery never waits for a file
// removal.
func dropExpiredOne(ctx context.Context, st *store.Store) (string, error) {
	return partitionTx(ctx, st, "drop an expired week's relation", func(q *dbq.Queries) (string, error) { return q.DropExpired(ctx) })
}

// expireKept deletes up to limit kept deliveries past their retention
// (delivered before deliveredBefore, dead before deadBefore), with their
// attempts and the events nothing else needs, and returns how many.
func expireKept(ctx context.Context, st *store.Store, deliveredBefore, deadBefore time.Time, limit int) (int, error) {
	var n int32
	err := st.InTx(ctx, func(tx store.Tx) error {
		var err error
		n, err = tx.Q.ExpireKept(ctx, dbq.ExpireKeptParams{DeliveredBefore: deliveredBefore, DeadBefore: deadBefore, MaxRows: int32(limit)})
		if err != nil {
			return fmt.Errorf("expire kept: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("expire kept deliveries: %w", err)
	}
	return int(n), nil
}

// partitionTx runs one partition change (what it does: what) in a
// transaction of its own whose waits for locks are bounded by
// PartitionLockTimeout.
func partitionTx[T any](ctx context.Context, st *store.Store, what string, fn func(*dbq.Queries) (T, error)) (T, error) {
	var v T
	err := st.InTx(ctx, func(tx store.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", PartitionLockTimeout.Milliseconds())); err != nil {
			return fmt.Errorf("set lock_timeout: %w", err)
		}
		var err error
		v, err = fn(tx.Q)
		return err
	})
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%s: %w", what, err)
	}
	return v, nil
}

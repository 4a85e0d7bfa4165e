package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Events, deliveries and attempts live in one partition per week of their
// event, plus a default partition (*_kept) for what outlives its week: see
// 00014_time_partitions.sql. These methods are the retention job's; each
// runs in a transaction of its own.

// PartitionSpan is the time one partition covers: a week, from Monday
// 00:00 UTC (sluice_week_start_ms in 00014_time_partitions.sql).
const PartitionSpan = 7 * 24 * time.Hour

// mondayOffset is how far the first Monday (1970-01-05) is past the Unix
// epoch, a Thursday.
const mondayOffset = 4 * 24 * time.Hour

// PartitionWeek is the start (Monday 00:00 UTC) of the week holding t.
func PartitionWeek(t time.Time) time.Time {
	since := t.Sub(time.Unix(0, 0).Add(mondayOffset))
	return time.Unix(0, 0).Add(mondayOffset + since/PartitionSpan*PartitionSpan).UTC()
}

// WeekBounds returns the smallest ids of the week holding a UUIDv7's
// millisecond and of the week after: a query that says "event_id >= lo AND
// event_id < hi" probes only that week's partition (or *_kept, once the week
// is dropped). The arithmetic is sluice_week_lo's and sluice_week_hi's, on
// the id's first 48 bits as they are, so the two agree on any id (and bound
// it, for any time from 1970-01-05 on); an upper bound past 48 bits is the
// largest id.
func WeekBounds(id uuid.UUID) (lo, hi uuid.UUID) {
	const week, monday = int64(PartitionSpan / time.Millisecond), int64(mondayOffset / time.Millisecond)
	var b [8]byte
	copy(b[2:], id[:6])
	ms := int64(binary.BigEndian.Uint64(b[:]))
	start := (ms-monday)/week*week + monday
	return msID(start), msID(start + week)
}

// msID is the smallest UUIDv7 of a millisecond, or the largest id when ms
// does not fit the 48 bits of a UUIDv7's time.
func msID(ms int64) uuid.UUID {
	var id uuid.UUID
	if ms >= 1<<48 {
		return uuid.Max
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(ms))
	copy(id[:6], b[2:])
	return id
}

// PartitionLockTimeout bounds how long creating or retiring a week waits
// for its locks. Retiring a week locks the three tables (a detach needs
// that), and while it waits every query behind it waits too, so it gives
// up soon and the job tries again (retention.LockRetries).
const PartitionLockTimeout = 20 * time.Millisecond

// EnsureWeekPartitions creates the partitions of the week holding t, if
// missing, and reports whether it created them.
func (s *Store) EnsureWeekPartitions(ctx context.Context, t time.Time) (bool, error) {
	return partitionTx(ctx, s, func(q *dbq.Queries) (bool, error) { return q.EnsureWeekPartitions(ctx, t) })
}

// PartitionWeeks returns the weeks that have partitions, oldest first,
// each as its start.
func (s *Store) PartitionWeeks(ctx context.Context) ([]time.Time, error) {
	rows, err := s.q.PartitionWeeks(ctx)
	weeks := make([]time.Time, len(rows))
	for i, d := range rows {
		weeks[i] = time.Date(d.Time.Year(), d.Time.Month(), d.Time.Day(), 0, 0, 0, 0, time.UTC)
	}
	return weeks, err
}

// Retiring a week is three steps (00018_retired_weeks.sql): RetireWeek
// detaches its partitions under the tables' locks, KeepRetired moves out
// what must outlive it without them, and DropExpired drops what is left,
// one index or table a call.

// RetireWeek detaches the partitions of the week starting at week and
// renames them retired_*, and reports whether the week had partitions.
// Its locks hold up every statement on the three tables, for a few ms
// whatever the week holds.
func (s *Store) RetireWeek(ctx context.Context, week time.Time) (bool, error) {
	return partitionTx(ctx, s, func(q *dbq.Queries) (bool, error) {
		return q.RetireWeek(ctx, pgtype.Date{Time: PartitionWeek(week), Valid: true})
	})
}

// KeepRetired moves, from every retired week, its deliveries still queued,
// those that died at or after deadBefore, and their attempts and events
// into the kept partitions, marks the weeks expired, and returns how many
// deliveries it kept.
func (s *Store) KeepRetired(ctx context.Context, deadBefore time.Time) (int64, error) {
	return partitionTx(ctx, s, func(q *dbq.Queries) (int64, error) { return q.KeepRetired(ctx, deadBefore) })
}

// DropExpired drops one index, one table's foreign keys or one table of
// the expired weeks, in a transaction of its own, and returns what it
// dropped, or "" when none is left. Its commit removes that relation's
// files; one call at a time, paced by its caller, spreads that work out.
// Only dropping foreign keys locks the tables they reference (endpoints,
// tenants), and it removes no files, so delivery never waits for a file
// removal.
func (s *Store) DropExpired(ctx context.Context) (string, error) {
	return partitionTx(ctx, s, func(q *dbq.Queries) (string, error) { return q.DropExpired(ctx) })
}

// ExpireKept deletes up to limit kept deliveries past their retention
// (delivered before deliveredBefore, dead before deadBefore), with their
// attempts and the events nothing else needs, and returns how many.
func (s *Store) ExpireKept(ctx context.Context, deliveredBefore, deadBefore time.Time, limit int) (int, error) {
	n, err := s.q.ExpireKept(ctx, dbq.ExpireKeptParams{DeliveredBefore: deliveredBefore, DeadBefore: deadBefore, MaxRows: int32(limit)})
	return int(n), err
}

// partitionTx runs one partition change in a transaction of its own whose
// waits for locks are bounded by PartitionLockTimeout.
func partitionTx[T any](ctx context.Context, s *Store, fn func(*dbq.Queries) (T, error)) (T, error) {
	var v T
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", PartitionLockTimeout.Milliseconds())); err != nil {
			return fmt.Errorf("set lock_timeout: %w", err)
		}
		var err error
		v, err = fn(s.q.WithTx(tx))
		return err
	})
	return v, err
}

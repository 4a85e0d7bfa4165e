package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Events, deliveries and attempts live in one partition per UTC day of
// their event, plus a default partition (*_kept) for what outlives its
// day: see 00014_time_partitions.sql. These methods are the retention
// job's; each runs in a transaction of its own.

// partitionLockTimeout bounds how long creating or dropping a day waits
// for its locks. Dropping a day locks the three tables (a detach needs
// that), and while it waits every query behind it waits too, so it gives
// up soon and the job tries again.
const partitionLockTimeout = "200ms"

// PartitionDay is the UTC day of t, as a time at its midnight.
func PartitionDay(t time.Time) time.Time {
	return t.UTC().Truncate(24 * time.Hour)
}

// EnsureDayPartitions creates the partitions of the day holding t, if
// missing, and reports whether it created them.
func (s *Store) EnsureDayPartitions(ctx context.Context, t time.Time) (bool, error) {
	var created bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := setLockTimeout(ctx, tx); err != nil {
			return err
		}
		var err error
		created, err = s.q.WithTx(tx).EnsureDayPartitions(ctx, pgDate(t))
		return err
	})
	return created, err
}

// DayPartitions returns the days that have partitions, oldest first, each
// at its midnight UTC.
func (s *Store) DayPartitions(ctx context.Context) ([]time.Time, error) {
	rows, err := s.q.DayPartitions(ctx)
	days := make([]time.Time, len(rows))
	for i, d := range rows {
		days[i] = time.Date(d.Time.Year(), d.Time.Month(), d.Time.Day(), 0, 0, 0, 0, time.UTC)
	}
	return days, err
}

// pgDate is the UTC day of t as a Postgres date.
func pgDate(t time.Time) pgtype.Date {
	return pgtype.Date{Time: PartitionDay(t), Valid: true}
}

// DropDayPartitions drops the partitions of a day, after moving into the
// kept partitions its deliveries still queued, those that died at or after
// deadBefore, and their attempts and events. It returns how many
// deliveries it kept, or -1 when the day had no partitions.
func (s *Store) DropDayPartitions(ctx context.Context, day, deadBefore time.Time) (int64, error) {
	var kept int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := setLockTimeout(ctx, tx); err != nil {
			return err
		}
		var err error
		kept, err = s.q.WithTx(tx).DropDayPartitions(ctx, dbq.DropDayPartitionsParams{Day: pgDate(day), DeadBefore: deadBefore})
		return err
	})
	return kept, err
}

// ExpireKept deletes up to limit kept deliveries past their retention
// (delivered before deliveredBefore, dead before deadBefore), with their
// attempts and the events nothing else needs, and returns how many.
func (s *Store) ExpireKept(ctx context.Context, deliveredBefore, deadBefore time.Time, limit int) (int, error) {
	n, err := s.q.ExpireKept(ctx, dbq.ExpireKeptParams{DeliveredBefore: deliveredBefore, DeadBefore: deadBefore, MaxRows: int32(limit)})
	return int(n), err
}

func setLockTimeout(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '"+partitionLockTimeout+"'"); err != nil {
		return fmt.Errorf("set lock_timeout: %w", err)
	}
	return nil
}

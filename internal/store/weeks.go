package store

import (
	"encoding/binary"
	"time"

	"github.com/google/uuid"
)

// Events, deliveries and attempts live in one partition per week of their
// event, plus a default partition (*_kept) for what outlives its week: see
// 00014_time_partitions.sql. Package maintenance creates and retires the
// weeks; the statements here find a row's week from its id.

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

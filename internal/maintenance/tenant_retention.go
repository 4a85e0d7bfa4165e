package maintenance

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// A tenant's own retention (tenant_retention, 00042_tenant_retention.sql)
// is shorter than the server's. What is past it is out of every read at
// once; expireTenants then deletes it, in statements of at most
// TenantChunk rows that each read only that tenant's rows (through the
// (tenant_id, id) index of each week's partition), so that the tenants on
// the server's retention, whose weeks go as whole partitions, pay nothing
// for it. After each statement it rests as long as the statement took, so
// that the deletion has the database at most half the time and the
// deliveries committed meanwhile do not queue behind its WAL.

// TenantChunk bounds the deliveries, or events, one statement of
// expireTenants deletes: each is its own short transaction.
const TenantChunk = 1000

// ExpirePace is how ExpireTenant goes.
type ExpirePace struct {
	// Clock, when set, paces it: after each statement it waits on Clock
	// as long as the statement took. Nil: no wait.
	Clock jobs.Clock
	// Observe, when set, is told of each statement: the table it deleted
	// from ("deliveries" or "events"), the rows and the time it took.
	Observe func(table string, rows int, took time.Duration)
}

// expireTenants deletes, for every tenant with a retention of its own,
// its deliveries (with their attempts) and then its events past it, and
// returns how many deliveries and events it deleted.
func (w *RetentionWorker) expireTenants(ctx context.Context, now time.Time) (deliveries, events int, err error) {
	tenants, err := store.Read(ctx, w.store, func(q *dbq.Queries, ctx context.Context, _ struct{}) ([]dbq.TenantRetention, error) {
		return q.TenantsWithRetention(ctx)
	}, struct{}{})
	if err != nil {
		return 0, 0, fmt.Errorf("list the tenants with a retention of their own: %w", err)
	}
	for _, t := range tenants {
		d, e, err := ExpireTenant(ctx, w.store, t, now, TenantChunk, ExpirePace{Clock: w.cfg.Clock})
		deliveries, events = deliveries+d, events+e
		if err != nil {
			return deliveries, events, err
		}
	}
	return deliveries, events, nil
}

// ExpireTenant deletes what of tenant t is past its own retention as of
// now, limit rows a statement, paced by pace, and returns how many
// deliveries and events it deleted.
func ExpireTenant(ctx context.Context, st *store.Store, t dbq.TenantRetention, now time.Time, limit int,
	pace ExpirePace) (deliveries, events int, err error) {
	before := TenantExpiryBound(t, now)
	deliveries, err = pace.deleteAll(ctx, "deliveries", limit, func(ctx context.Context) (int32, error) {
		return store.Read(ctx, st, (*dbq.Queries).ExpireTenantDeliveries,
			dbq.ExpireTenantDeliveriesParams{TenantID: t.TenantID, Before: before, MaxRows: int32(limit)})
	})
	if err != nil {
		return deliveries, 0, fmt.Errorf("delete the deliveries of tenant %s past its retention: %w", t.TenantID, err)
	}
	if t.RetentionSeconds == nil {
		return deliveries, 0, nil // its events go with their weeks
	}
	events, err = pace.deleteAll(ctx, "events", limit, func(ctx context.Context) (int32, error) {
		return store.Read(ctx, st, (*dbq.Queries).ExpireTenantEvents,
			dbq.ExpireTenantEventsParams{TenantID: t.TenantID, Before: before, MaxRows: int32(limit)})
	})
	if err != nil {
		return deliveries, events, fmt.Errorf("delete the events of tenant %s past its retention: %w", t.TenantID, err)
	}
	return deliveries, events, nil
}

// deleteAll runs del, which deletes up to limit rows of table, until it
// deletes fewer, resting between statements, and returns the rows deleted.
func (p ExpirePace) deleteAll(ctx context.Context, table string, limit int, del func(context.Context) (int32, error)) (int, error) {
	total := 0
	for {
		start := time.Now()
		n, err := del(ctx)
		took := time.Since(start)
		total += int(n)
		if p.Observe != nil {
			p.Observe(table, int(n), took)
		}
		if err != nil || int(n) < limit {
			return total, err
		}
		if p.Clock != nil {
			if err := sleep(ctx, p.Clock, took); err != nil {
				return total, err
			}
		}
	}
}

// TenantExpiryBound is the first id of the time before which something
// of tenant t may be past its own retention as of now: the later of now
// less its retention and now less its dead retention.
func TenantExpiryBound(t dbq.TenantRetention, now time.Time) uuid.UUID {
	var from time.Time
	for _, s := range []*int64{t.RetentionSeconds, t.DeadRetentionSeconds} {
		if s != nil {
			if at := now.Add(-time.Duration(*s) * time.Second); at.After(from) {
				from = at
			}
		}
	}
	var id uuid.UUID
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(max(from.UnixMilli(), 0)))
	copy(id[:6], b[2:])
	return id
}

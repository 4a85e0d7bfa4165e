// RetentionWorker is the periodic River worker that keeps the week
// partitions of events, deliveries and attempts: it creates them a week
// ahead, drops each week once all of it is older than SLUICE_RETENTION
// (moving out first what must outlive it: deliveries still queued and dead
// ones, kept for replay until SLUICE_DEAD_RETENTION), and deletes from the
// kept partitions what has since expired. A week is dropped in three
// steps (RetireWeek, keepRetired, dropExpiredOne): only the first,
// which costs the same however many rows the week holds, holds up
// delivery. The week's files are removed a relation at a time, and never
// under a lock delivery waits for: a table's foreign keys, whose dropping
// locks endpoints and tenants, go in a call of their own before it.

package maintenance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Ahead is how far ahead of now partitions are created: the next week's
// in the last two days of this one. Every partition costs the queries
// that read them all (a claim), so none is made earlier than needed. The
// job runs every hour, so two days leave room for a long outage before
// rows of a week without partitions land in the kept ones (where they are
// safe, and from where they move to their week's partitions when it is
// created).
const Ahead = 2 * 24 * time.Hour

// chunk bounds one delete from the kept partitions.
const chunk = 5000

// DefaultAuditRetention is how long audit entries are kept unless
// configured (SLUICE_AUDIT_RETENTION): a year.
const DefaultAuditRetention = 8760 * time.Hour

// RetentionConfig says how long deliveries and audit entries are kept.
type RetentionConfig struct {
	// Delivered is how long a delivered delivery is kept. Required.
	Delivered time.Duration
	// Dead is how long a dead delivery is kept for replay. Required.
	Dead time.Duration
	// Audit is how long an audit entry is kept (default
	// DefaultAuditRetention). Whole months go: an entry is kept until the
	// month after the one it falls in is past Audit.
	Audit time.Duration
	// Clock is the time a run goes by, and paces its pauses and retries
	// (default jobs.SystemClock).
	Clock jobs.Clock
}

// Resolve returns c with its defaults set, or an error if it is not
// valid.
func (c RetentionConfig) Resolve() (RetentionConfig, error) {
	c.Clock = cmp.Or(c.Clock, jobs.SystemClock)
	c.Audit = cmp.Or(c.Audit, DefaultAuditRetention)
	switch {
	case c.Delivered <= 0:
		return c, fmt.Errorf("retention: Delivered must be positive, not %s", c.Delivered)
	case c.Dead <= 0:
		return c, fmt.Errorf("retention: Dead must be positive, not %s", c.Dead)
	case c.Audit < 0:
		return c, fmt.Errorf("retention: Audit must be positive, not %s", c.Audit)
	}
	return c, nil
}

// RetentionReport is what one run did.
type RetentionReport struct {
	// Created is the number of weeks whose partitions it created.
	Created int
	// Dropped is the number of weeks whose partitions it retired.
	Dropped int
	// Kept is the number of deliveries it moved out of retired weeks.
	Kept int64
	// Removed is the number of indexes and tables of expired weeks it
	// dropped.
	Removed int
	// Expired is the number of kept deliveries it deleted.
	Expired int
	// TenantDeliveries and TenantEvents are the deliveries and events of
	// tenants with a retention of their own that it deleted past it.
	TenantDeliveries, TenantEvents int
	// AuditCreated and AuditDropped are the months of the audit log whose
	// partitions it created and dropped.
	AuditCreated, AuditDropped int
}

// RetentionWorker runs jobs.RetentionArgs.
type RetentionWorker struct {
	river.WorkerDefaults[jobs.RetentionArgs]
	store *store.Store
	cfg   RetentionConfig
}

// NewRetentionWorker returns a retention worker.
func NewRetentionWorker(st *store.Store, cfg RetentionConfig) (*RetentionWorker, error) {
	cfg, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	return &RetentionWorker{store: st, cfg: cfg}, nil
}

// RetentionTimeout is the longest one retention run may take; an interrupted run
// has made progress and the next one goes on from there.
const RetentionTimeout = 10 * time.Minute

// Timeout implements river.Worker.
func (w *RetentionWorker) Timeout(*river.Job[jobs.RetentionArgs]) time.Duration {
	return RetentionTimeout
}

// Work runs retention as of now.
func (w *RetentionWorker) Work(ctx context.Context, job *river.Job[jobs.RetentionArgs]) error {
	_, err := w.Run(ctx, w.cfg.Clock.Now())
	return err
}

// Run keeps the partitions as of now: it creates this week's, and the
// next's when it starts within Ahead, drops every week that ended before
// now - Delivered, and expires the kept deliveries; it does the same
// for the audit log's months (auditMonths); and it deletes what of the
// tenants with a retention of their own is past it (expireTenants).
func (w *RetentionWorker) Run(ctx context.Context, now time.Time) (RetentionReport, error) {
	var r RetentionReport
	if err := w.auditMonths(ctx, now, &r); err != nil {
		return r, err
	}
	for _, t := range []time.Time{now, now.Add(Ahead)} {
		created, err := retryLocked(ctx, w.cfg.Clock, func() (bool, error) { return ensureWeekPartitions(ctx, w.store, t) })
		if err != nil {
			return r, err
		}
		if created {
			r.Created++
		}
	}
	weeks, err := partitionWeeks(ctx, w.store)
	if err != nil {
		return r, err
	}
	deliveredBefore, deadBefore := now.Add(-w.cfg.Delivered), now.Add(-w.cfg.Dead)
	// First what a run that stopped part way left retired, then each week
	// due, kept right after it is retired: until then what it keeps is out
	// of sight.
	if r.Kept, err = w.keep(ctx, deadBefore); err != nil {
		return r, err
	}
	for _, week := range weeks {
		if week.Add(store.PartitionSpan).After(deliveredBefore) {
			break
		}
		retired, err := retryLocked(ctx, w.cfg.Clock, func() (bool, error) { return RetireWeek(ctx, w.store, week) })
		if err != nil {
			return r, err
		}
		if !retired {
			continue
		}
		r.Dropped++
		kept, err := w.keep(ctx, deadBefore)
		r.Kept += kept
		if err != nil {
			return r, err
		}
	}
	if r.Removed, err = w.dropExpired(ctx); err != nil {
		return r, err
	}
	for {
		n, err := expireKept(ctx, w.store, deliveredBefore, deadBefore, chunk)
		r.Expired += n
		if err != nil {
			return r, err
		}
		if n < chunk {
			break
		}
	}
	r.TenantDeliveries, r.TenantEvents, err = w.expireTenants(ctx, now)
	return r, err
}

// auditMonths creates the audit log's partition of this month, and of the
// next when it starts within Ahead, and drops the months wholly older
// than now - Audit: a DROP TABLE per month, whatever it holds.
func (w *RetentionWorker) auditMonths(ctx context.Context, now time.Time, r *RetentionReport) error {
	for _, t := range []time.Time{now, now.Add(Ahead)} {
		created, err := retryLocked(ctx, w.cfg.Clock, func() (bool, error) {
			return store.Read(ctx, w.store, (*dbq.Queries).EnsureAuditMonth, t)
		})
		if err != nil {
			return fmt.Errorf("ensure audit month %s: %w", t.Format("2006-01"), err)
		}
		if created {
			r.AuditCreated++
		}
	}
	before := now.Add(-w.cfg.Audit)
	dropped, err := retryLocked(ctx, w.cfg.Clock, func() (int32, error) {
		return store.Read(ctx, w.store, (*dbq.Queries).DropAuditMonths, before)
	})
	r.AuditDropped = int(dropped)
	if err != nil {
		return fmt.Errorf("drop audit months before %s: %w", before.Format(time.RFC3339), err)
	}
	return nil
}

// keep moves out of every retired week what must outlive it.
func (w *RetentionWorker) keep(ctx context.Context, deadBefore time.Time) (int64, error) {
	return retryLocked(ctx, w.cfg.Clock, func() (int64, error) { return keepRetired(ctx, w.store, deadBefore) })
}

// RemovePause is the wait between two relations of an expired week being
// dropped: each drop's commit removes that relation's files, work for the
// kernel that grows with their size (a day of 2,000,000 deliveries is
// about 1.3 GB in all), and the pauses keep it from taking a core away
// from delivery for long at a time.
const RemovePause = 100 * time.Millisecond

// dropExpired drops the indexes, foreign keys and tables of expired weeks
// one at a time (dropExpiredOne), RemovePause apart, and returns how many
// pieces it dropped.
func (w *RetentionWorker) dropExpired(ctx context.Context) (int, error) {
	for n := 0; ; n++ {
		name, err := retryLocked(ctx, w.cfg.Clock, func() (string, error) { return dropExpiredOne(ctx, w.store) })
		if err != nil || name == "" {
			return n, err
		}
		if err := sleep(ctx, w.cfg.Clock, RemovePause); err != nil {
			return n, fmt.Errorf("pause between drops: %w", err)
		}
	}
}

// LockRetries and LockRetryWait bound how often a partition change that
// could not get its locks in time (PartitionLockTimeout) is tried
// again before the run fails (and River retries the job): a hundred times,
// a quarter of a second apart give or take a fifth, about half a minute of
// trying in all. Under load a try often fails: Sluice's statements hold
// the tables all the time, in more than one order.
const (
	LockRetries   = 100
	LockRetryWait = 250 * time.Millisecond
)

// retryLocked calls fn until it does not fail for want of a lock.
func retryLocked[T any](ctx context.Context, clock jobs.Clock, fn func() (T, error)) (T, error) {
	for i := 1; ; i++ {
		v, err := fn()
		if i == LockRetries || !LockNotAvailable(err) {
			return v, err
		}
		wait := time.Duration(float64(LockRetryWait) * (0.8 + 0.4*rand.Float64()))
		if err := sleep(ctx, clock, wait); err != nil {
			return v, fmt.Errorf("wait to retry a partition change: %w", err)
		}
	}
}

// sleep waits d on clock, or until ctx ends (its error).
func sleep(ctx context.Context, clock jobs.Clock, d time.Duration) error {
	c, stop := clock.After(d)
	defer stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("pause between pieces: %w", ctx.Err())
	case <-c:
		return nil
	}
}

// LockNotAvailable reports whether err is Postgres giving up on a lock
// (lock_timeout).
func LockNotAvailable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

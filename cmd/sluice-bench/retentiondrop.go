package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	sluiceretention "github.com/sluice-dev/sluice/internal/maintenance"
)

// Dropping the old week as the retention job does (maintenance's
// RetentionWorker.Run, in three steps; see 00018_retired_weeks.sql):
//   - retire: maintenance.RetireWeek under retryLocked, a transaction of its
//     own with SET LOCAL lock_timeout = maintenance.PartitionLockTimeout,
//     retried after maintenance.LockRetryWait when it could not get its
//     locks in time, at most sluiceretention.LockRetries times;
//   - keep: what must outlive the week moved out;
//   - removal: one index or table a transaction,
//     sluiceretention.RemovePause apart.

// dropped is what dropping the day took.
type dropped struct {
	kept      int64         // deliveries the keep step kept; -1 when the week had no partitions
	tries     int           // retire transactions, the one that succeeded included
	start     time.Time     // the first BEGIN
	end       time.Time     // the successful retire's COMMIT answer
	call      time.Duration // SELECT sluice_retire_week of the successful try, as the client saw it
	commit    time.Duration // its COMMIT, as the client saw it
	execMS    float64       // pg_stat_statements' total_exec_time of the call; -1 when not tracked
	lockFails []time.Duration
	blockers  []string      // what the failed tries waited for, seen from a second connection
	keep      time.Duration // the keep step's transaction, as the client saw it
	removal   removal       // dropping the expired tables afterwards
}

// removal is what dropping the expired week's indexes and tables took.
type removal struct {
	pieces  int           // indexes and tables dropped
	db      time.Duration // their transactions at the client, summed
	largest time.Duration // the longest transaction of one piece
	end     time.Time     // the last piece's commit
	// lockFails are the tries that gave up on a lock (lock_timeout) and
	// were made again.
	lockFails int
}

// wall is the retire step's wall time, failed tries and their waits included.
func (d dropped) wall() time.Duration { return d.end.Sub(d.start) }

// lastWork is when the drop's last transaction, removal included, ended.
func (d dropped) lastWork() time.Time {
	if d.removal.end.After(d.end) {
		return d.removal.end
	}
	return d.end
}

// dropDay drops the day's partitions as the retention job would, keeping
// the dead deliveries that died since now - 30 days.
func dropDay(ctx context.Context, db *pgx.Conn, day time.Time, pgss bool) (d dropped, err error) {
	before := dropStatementTime(ctx, db, pgss)
	d.start = time.Now()
	for d.tries = 1; ; d.tries++ {
		t0 := time.Now()
		seen := watchBlockers(ctx, db, sluiceretention.PartitionLockTimeout/2)
		err = retireOnce(ctx, db, day, &d)
		blockers := seen()
		if err == nil || d.tries == sluiceretention.LockRetries || !sluiceretention.LockNotAvailable(err) {
			break
		}
		d.lockFails = append(d.lockFails, time.Since(t0))
		d.blockers = append(d.blockers, blockers)
		select {
		case <-ctx.Done():
			return d, fmt.Errorf("wait to retire again: %w", ctx.Err())
		case <-time.After(sluiceretention.LockRetryWait):
		}
	}
	d.end = time.Now()
	if err != nil {
		return d, fmt.Errorf("retire %s (try %d): %w", day.Format(time.DateOnly), d.tries, err)
	}
	d.execMS = -1
	if after := dropStatementTime(ctx, db, pgss); before >= 0 && after >= 0 {
		d.execMS = after - before
	}
	t0 := time.Now()
	if d.kept >= 0 {
		err = inPartitionTx(ctx, db, `SELECT sluice_keep_retired(now() - interval '30 days')`, &d.kept)
	}
	d.keep = time.Since(t0)
	if err != nil {
		return d, fmt.Errorf("keep from %s: %w", day.Format(time.DateOnly), err)
	}
	d.removal, err = dropExpired(ctx, db)
	return d, err
}

// retireOnce is one try: BEGIN, SET LOCAL lock_timeout, the call, COMMIT.
func retireOnce(ctx context.Context, db *pgx.Conn, day time.Time, d *dropped) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", sluiceretention.PartitionLockTimeout.Milliseconds())); err != nil {
		return fmt.Errorf("set lock_timeout: %w", err)
	}
	t0 := time.Now()
	var retired bool
	if err := tx.QueryRow(ctx, `SELECT sluice_retire_week($1::date)`, day.Format(time.DateOnly)).Scan(&retired); err != nil {
		return fmt.Errorf("sluice_retire_week: %w", err)
	}
	d.call = time.Since(t0)
	t0 = time.Now()
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	d.commit = time.Since(t0)
	d.kept = map[bool]int64{true: 0, false: -1}[retired]
	return nil
}

// dropExpired drops the expired week's indexes and tables as the
// retention job does: one a transaction, sluiceretention.RemovePause apart.
func dropExpired(ctx context.Context, db *pgx.Conn) (r removal, err error) {
	for {
		t0 := time.Now()
		var name string
		if err := inPartitionTx(ctx, db, `SELECT coalesce(sluice_drop_expired(), '')`, &name); err != nil {
			if !sluiceretention.LockNotAvailable(err) || r.lockFails+1 >= sluiceretention.LockRetries {
				return r, fmt.Errorf("drop the expired week (piece %d): %w", r.pieces+1, err)
			}
			// As the job does (retryLocked): the lock is tried again
			// a little later.
			r.lockFails++
			select {
			case <-ctx.Done():
				return r, fmt.Errorf("wait to drop the expired week again: %w", ctx.Err())
			case <-time.After(sluiceretention.LockRetryWait):
			}
			continue
		}
		if name == "" {
			return r, nil
		}
		took := time.Since(t0)
		r.pieces++
		r.db += took
		r.largest = max(r.largest, took)
		r.end = time.Now()
		select {
		case <-ctx.Done():
			return r, fmt.Errorf("pause between pieces: %w", ctx.Err())
		case <-time.After(sluiceretention.RemovePause):
		}
	}
}

// inPartitionTx runs one query in a transaction with the job's
// lock_timeout and scans its one value into dst.
func inPartitionTx(ctx context.Context, db *pgx.Conn, sql string, dst any) error {
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", sluiceretention.PartitionLockTimeout.Milliseconds())); err != nil {
			return fmt.Errorf("set lock_timeout: %w", err)
		}
		return tx.QueryRow(ctx, sql).Scan(dst)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// dropStatementTime is pg_stat_statements' total_exec_time of the drop
// calls so far, in ms; -1 when it cannot be read.
func dropStatementTime(ctx context.Context, db *pgx.Conn, pgss bool) float64 {
	if !pgss {
		return -1
	}
	var total float64
	if err := db.QueryRow(ctx, `/* bench-retention */
		SELECT coalesce(sum(total_exec_time), 0) FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND query LIKE 'SELECT sluice_retire_week(%'`).Scan(&total); err != nil {
		return -1
	}
	return total
}

// keptRows counts the day's rows in the kept partitions, after the drop.
func keptRows(ctx context.Context, db *pgx.Conn, day time.Time) (events, deliveries, dead, attempts int, err error) {
	lo, hi := day.UnixMilli(), day.AddDate(0, 0, 1).UnixMilli()
	err = db.QueryRow(ctx, `/* bench-retention */
		SELECT (SELECT count(*) FROM events_kept WHERE id >= sluice_uuid_at($1) AND id < sluice_uuid_at($2)),
		       (SELECT count(*) FROM deliveries_kept WHERE event_id >= sluice_uuid_at($1) AND event_id < sluice_uuid_at($2)),
		       (SELECT count(*) FROM deliveries_kept WHERE event_id >= sluice_uuid_at($1) AND event_id < sluice_uuid_at($2)
		                                            AND status = 'dead'),
		       (SELECT count(*) FROM delivery_attempts_kept WHERE event_id >= sluice_uuid_at($1) AND event_id < sluice_uuid_at($2))`,
		lo, hi).Scan(&events, &deliveries, &dead, &attempts)
	if err != nil {
		return 0, 0, 0, 0, fmt.Errorf("count the kept rows: %w", err)
	}
	var left *string
	if err := db.QueryRow(ctx, `SELECT to_regclass($1)::text`, "deliveries_"+day.Format("20060102")).Scan(&left); err != nil {
		return 0, 0, 0, 0, fmt.Errorf("look for the dropped partition: %w", err)
	}
	if left != nil {
		return 0, 0, 0, 0, fmt.Errorf("%s still exists after the drop", *left)
	}
	var expired int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname ~ '^(retired|expired)_'`).Scan(&expired); err != nil {
		return 0, 0, 0, 0, fmt.Errorf("count the retired and expired relations: %w", err)
	}
	if expired > 0 {
		return 0, 0, 0, 0, fmt.Errorf("%d relations of retired or expired weeks are left after the drop", expired)
	}
	return events, deliveries, dead, attempts, nil
}

// watchBlockers looks, after wait, from a connection of its own, at the
// sessions blocking db's session (pg_blocking_pids); the result waits for
// the look and describes them.
func watchBlockers(ctx context.Context, db *pgx.Conn, wait time.Duration) func() string {
	out := make(chan string, 1)
	pid := db.PgConn().PID()
	go func() {
		ctx, cancel := context.WithTimeout(ctx, wait+2*time.Second)
		defer cancel()
		conn, err := pgx.ConnectConfig(ctx, db.Config().Copy())
		if err != nil {
			out <- "watch: " + err.Error()
			return
		}
		defer conn.Close(context.WithoutCancel(ctx))
		time.Sleep(wait)
		var self string
		if err := conn.QueryRow(ctx, `/* bench-retention */
			SELECT coalesce(string_agg(relation::regclass::text || ' ' || mode, ', '), 'nothing') FROM pg_locks
			WHERE pid = $1 AND NOT granted`, pid).Scan(&self); err != nil {
			out <- "watch: " + err.Error()
			return
		}
		rows, err := conn.Query(ctx, `/* bench-retention */
			SELECT coalesce(extract(epoch FROM now() - a.xact_start) * 1000, -1)::int,
			       coalesce((SELECT string_agg(l.relation::regclass::text, ', ') FROM pg_locks l
			                 WHERE l.pid = a.pid AND NOT l.granted), 'nothing'),
			       left(regexp_replace(a.query, '^-- name: (\w+).*$|\s+', '\1', 'g'), 40)
			FROM pg_stat_activity a WHERE a.pid = ANY (pg_blocking_pids($1))
			ORDER BY a.xact_start`, pid)
		if err != nil {
			out <- "watch: " + err.Error()
			return
		}
		n, parts := 0, []string{"the drop waiting for " + self + ", behind"}
		for rows.Next() {
			var xactMS int
			var waiting, query string
			if err := rows.Scan(&xactMS, &waiting, &query); err != nil {
				out <- "watch: " + err.Error()
				return
			}
			if n++; n <= 3 {
				parts = append(parts, fmt.Sprintf("%s (transaction %d ms old, waiting for %s)", query, xactMS, waiting))
			}
		}
		if err := rows.Err(); err != nil {
			parts = append(parts, "watch: "+err.Error())
		}
		if n > 3 {
			parts = append(parts, fmt.Sprintf("and %d more", n-3))
		}
		out <- parts[0] + " " + strings.Join(parts[1:], ", ")
	}()
	return func() string { return <-out }
}

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The retention scenario's old day: its partitions created with
// sluice_ensure_week, then filled set-based in SQL, one statement per
// table, with UUIDv7 ids of that day.

// oldDay is a seeded day and what it holds.
type oldDay struct {
	day                        time.Time // midnight UTC
	events, deliveries, dead   int       // dead: deliveries among deliveries
	attempts                   int
	insert, vacuum, checkpoint time.Duration
	checkpointErr              string
}

// suffix is the day's partition suffix, as sluice_ensure_week names it.
func (d oldDay) suffix() string { return d.day.Format("20060102") }

// table is the day's partition of parent, quoted.
func (d oldDay) table(parent string) string {
	return pgx.Identifier{parent + "_" + d.suffix()}.Sanitize()
}

// uuidv7At is SQL for a random UUIDv7 of the millisecond msExpr (as
// sluice_uuidv7 makes them, at a given time instead of now).
func uuidv7At(msExpr string) string {
	return "encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) PLACING substring(int8send(" + msExpr +
		") FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid"
}

// seedOldDay creates the partitions of day and fills them: perEndpoint
// events, each delivered (status 'delivered', one 200 attempt) to every
// one of eps, and dead more events with one delivery each, dead since now
// (status 'dead', one 500 attempt), which retention must keep. Event
// times are spread evenly over the day; a delivery's id is of its event's
// millisecond. It then vacuums and analyzes the partitions and runs a
// CHECKPOINT, so that the day is on disk as an old day would be.
func seedOldDay(ctx context.Context, db *pgx.Conn, day time.Time, tenant string, eps []string, perEndpoint, dead int) (d oldDay, err error) {
	d = oldDay{day: day, events: perEndpoint + dead, deliveries: perEndpoint*len(eps) + dead, dead: dead}
	d.attempts = d.deliveries
	lo := day.UnixMilli()
	t0 := time.Now()
	var created bool
	if err := db.QueryRow(ctx, `/* bench-retention */ SELECT sluice_ensure_week($1::timestamptz)`, day).Scan(&created); err != nil {
		return d, fmt.Errorf("sluice_ensure_week(%s): %w", day.Format(time.DateOnly), err)
	}
	if !created {
		return d, fmt.Errorf("the partitions of %s exist already", day.Format(time.DateOnly))
	}
	if _, err := db.Exec(ctx, `/* bench-retention */
		INSERT INTO events (id, tenant_id, type, payload, created_at)
		SELECT `+uuidv7At("ms")+`, $1, typ, json_build_object('seq', g, 'note', repeat('x', 160)), to_timestamp(ms / 1000.0)
		FROM (SELECT g, $2::bigint + (g - 1) * (86400000 / $3::int) AS ms, 'bench.retention.delivered' AS typ
		      FROM generate_series(1, $3::int) g
		      UNION ALL
		      SELECT g, $2::bigint + (g - 1) * (86400000 / $4::int) + 431, 'bench.retention.dead'
		      FROM generate_series(1, $4::int) g) s
		ORDER BY ms`, tenant, lo, perEndpoint, dead); err != nil {
		return d, fmt.Errorf("seed events: %w", err)
	}
	// The deliveries' foreign keys (tenant, endpoint) hold by construction;
	// with session_replication_role = replica their 2 × N checks are skipped.
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return fmt.Errorf("set session_replication_role: %w", err)
		}
		_, err := tx.Exec(ctx, `/* bench-retention */
			INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, status, attempt_count,
			                        failure_count, created_at, updated_at)
			SELECT `+uuidv7At("sluice_uuid_ms(e.id)")+`, e.tenant_id, e.id, eps[k], e.type,
			       CASE WHEN dead THEN 'dead' ELSE 'delivered' END, 1, dead::int,
			       e.created_at, CASE WHEN dead THEN now() ELSE e.created_at + interval '40 ms' END
			FROM `+d.table("events")+` e
			CROSS JOIN LATERAL (SELECT e.type = 'bench.retention.dead' AS dead) x
			CROSS JOIN (SELECT $1::uuid[] AS eps) p
			CROSS JOIN generate_series(1, cardinality($1::uuid[])) k
			WHERE NOT dead OR k = 1 + (e.payload->>'seq')::int % cardinality(eps)
			ORDER BY e.id, k`, eps)
		if err != nil {
			return fmt.Errorf("insert the deliveries: %w", err)
		}
		return nil
	})
	if err != nil {
		return d, fmt.Errorf("seed deliveries: %w", err)
	}
	if _, err := db.Exec(ctx, `/* bench-retention */
		INSERT INTO delivery_attempts (delivery_id, endpoint_id, event_id, at, status_code, latency_ms)
		SELECT id, endpoint_id, event_id, created_at + interval '40 ms',
		       CASE WHEN status = 'dead' THEN 500 ELSE 200 END, 12
		FROM `+d.table("deliveries")+`
		ORDER BY event_id, id`); err != nil {
		return d, fmt.Errorf("seed attempts: %w", err)
	}
	d.insert = time.Since(t0)
	t0 = time.Now()
	if _, err := db.Exec(ctx, `VACUUM (ANALYZE) `+d.table("events")+`, `+d.table("deliveries")+`, `+d.table("delivery_attempts")); err != nil {
		return d, fmt.Errorf("vacuum the seeded day: %w", err)
	}
	d.vacuum = time.Since(t0)
	t0 = time.Now()
	if _, err := db.Exec(ctx, `CHECKPOINT`); err != nil {
		d.checkpointErr = err.Error()
	}
	d.checkpoint = time.Since(t0)
	return d, d.verify(ctx, db)
}

// verify checks that the day's partitions hold what was seeded.
func (d oldDay) verify(ctx context.Context, db *pgx.Conn) error {
	var events, deliveries, dead, attempts int
	err := db.QueryRow(ctx, `/* bench-retention */
		SELECT (SELECT count(*) FROM `+d.table("events")+`),
		       (SELECT count(*) FROM `+d.table("deliveries")+`),
		       (SELECT count(*) FROM `+d.table("deliveries")+` WHERE status = 'dead'),
		       (SELECT count(*) FROM `+d.table("delivery_attempts")+`)`).Scan(&events, &deliveries, &dead, &attempts)
	if err != nil {
		return fmt.Errorf("count the seeded day: %w", err)
	}
	if events != d.events || deliveries != d.deliveries || dead != d.dead || attempts != d.attempts {
		return fmt.Errorf("seeded day holds %d events, %d deliveries (%d dead), %d attempts; want %d, %d (%d), %d",
			events, deliveries, dead, attempts, d.events, d.deliveries, d.dead, d.attempts)
	}
	return nil
}

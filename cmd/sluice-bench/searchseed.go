package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/store"
)

// The search scenario's rows: three tenants' events, deliveries and
// attempts over the 13 days before now, set-based in SQL.

const (
	searchDays       = 13     // within SLUICE_RETENTION's default 14 days
	searchChunk      = 250000 // events per statement at most
	searchEndpoints  = 20     // of the benchmark tenant; 8 of them of consumers
	searchConsumers  = 4
	searchOtherEPs   = 4 // of each other tenant
	searchFanOut     = 2 // deliveries per event
	searchOthers     = 2 // other tenants
	searchDeadEveryN = 20
)

// searchSeed is what seedSearch stored.
type searchSeed struct {
	window                   searchWindow
	consumers                []string
	tenantEvents, deliveries int // the benchmark tenant's events; all tenants' deliveries
	insert, analyze          time.Duration
}

func (s searchSeed) note() string {
	return fmt.Sprintf("seeded %d deliveries in all (%d events of the benchmark tenant, %d deliveries each) "+
		"from %s to %s: inserts %s, VACUUM ANALYZE %s", s.deliveries, s.tenantEvents, searchFanOut,
		s.window.from.Format(time.RFC3339), s.window.to.Format(time.RFC3339),
		s.insert.Round(time.Second), s.analyze.Round(time.Second))
}

// seedSearch makes the tenants and endpoints through Sluice, then total
// deliveries (with their events and attempts) in SQL, a third per tenant.
func seedSearch(ctx context.Context, env *Env, total int) (searchSeed, error) {
	s := searchSeed{window: searchWindow{from: time.Now().Add(-searchDays * 24 * time.Hour), to: time.Now().Add(-time.Minute)}}
	mine := make([]string, searchEndpoints)
	for i := range mine {
		consumer := ""
		if i < searchConsumers*2 {
			consumer = fmt.Sprintf("search-c%d", i/2)
			if i%2 == 0 {
				if err := env.API.PutConsumer(ctx, consumer); err != nil {
					return s, fmt.Errorf("create consumer %s: %w", consumer, err)
				}
				s.consumers = append(s.consumers, consumer)
			}
		}
		id, err := env.API.CreateConsumerEndpoint(ctx, fmt.Sprintf("http://127.0.0.1:9/search/%d", i), 10, consumer)
		if err != nil {
			return s, fmt.Errorf("create endpoint: %w", err)
		}
		mine[i] = id
	}
	tenants := [][]string{mine}
	for o := range searchOthers {
		c, err := snTenant(ctx, env, fmt.Sprintf("search-other-%d", o), "")
		if err != nil {
			return s, err
		}
		eps := make([]string, searchOtherEPs)
		for i := range eps {
			if eps[i], err = c.CreateEndpoint(ctx, fmt.Sprintf("http://127.0.0.1:9/other%d/%d", o, i), 10); err != nil {
				return s, fmt.Errorf("create another tenant's endpoint: %w", err)
			}
		}
		tenants = append(tenants, eps)
	}
	start := time.Now()
	for w := store.PartitionWeek(s.window.from); !w.After(s.window.to); w = w.AddDate(0, 0, 7) {
		if _, err := env.DB.Exec(ctx, `/* bench-search */ SELECT sluice_ensure_week($1::timestamptz)`, w); err != nil {
			return s, fmt.Errorf("sluice_ensure_week(%s): %w", w.Format(time.DateOnly), err)
		}
	}
	events := total / len(tenants) / searchFanOut
	s.tenantEvents = events
	for i, eps := range tenants {
		tenant, err := endpointTenant(ctx, env, eps[0])
		if err != nil {
			return s, err
		}
		for first := 1; first <= events; first += searchChunk {
			last := min(first+searchChunk-1, events)
			if err := seedSearchChunk(ctx, env.DB, tenant, eps, s.window, events, first, last); err != nil {
				return s, fmt.Errorf("seed tenant %d, events %d–%d: %w", i, first, last, err)
			}
			s.deliveries += (last - first + 1) * searchFanOut
			logf("  seeded %d of %d deliveries", s.deliveries, events*searchFanOut*len(tenants))
		}
	}
	s.insert = time.Since(start)
	start = time.Now()
	if _, err := env.DB.Exec(ctx, `VACUUM (ANALYZE) events, deliveries, delivery_attempts`); err != nil {
		return s, fmt.Errorf("vacuum the seeded rows: %w", err)
	}
	s.analyze = time.Since(start)
	return s, nil
}

// seedSearchChunk inserts events first..last of a tenant's n, spread
// evenly over w, each delivered to two of eps, and an attempt per
// delivery, in one statement.
func seedSearchChunk(ctx context.Context, db *pgx.Conn, tenant string, eps []string, w searchWindow, n, first, last int) error {
	// The deliveries' foreign keys (tenant, endpoint) hold by construction;
	// with session_replication_role = replica their checks are skipped.
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return fmt.Errorf("set session_replication_role: %w", err)
		}
		_, err := tx.Exec(ctx, `/* bench-search */
			WITH s AS (
				SELECT g, $3::bigint + ((g - 1)::float8 * ($4::bigint - $3::bigint) / $5::int)::bigint AS ms
				FROM generate_series($6::int, $7::int) g
			), ev AS (
				INSERT INTO events (id, tenant_id, type, payload, created_at)
				SELECT `+uuidv7At("ms")+`, $1::uuid,
				       (ARRAY['order.created', 'order.paid', 'order.refunded', 'invoice.paid', 'invoice.failed',
				              'customer.updated'])[1 + g % 6],
				       json_build_object('seq', g, 'amount', (hashint4(g) & 1048575) % 1000, 'note', repeat('x', 100)),
				       to_timestamp(ms / 1000.0)
				FROM s ORDER BY ms
				RETURNING id, type, created_at, (payload->>'seq')::int AS seq
			), d AS (
				INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, status, attempt_count,
				                        failure_count, created_at, updated_at)
				SELECT `+uuidv7At("sluice_uuid_ms(ev.id)")+`, $1::uuid, ev.id,
				       ($2::uuid[])[1 + (ev.seq * 2 + k) % cardinality($2::uuid[])], ev.type,
				       CASE WHEN x.dead THEN 'dead' ELSE 'delivered' END, 1, x.dead::int,
				       ev.created_at, ev.created_at + interval '40 ms'
				FROM ev CROSS JOIN generate_series(0, 1) k
				CROSS JOIN LATERAL (SELECT (hashint4(ev.seq * 2 + k) & 1048575) % $8::int = 0 AS dead) x
				ORDER BY ev.id, k
				RETURNING id, endpoint_id, event_id, created_at, status
			)
			INSERT INTO delivery_attempts (delivery_id, endpoint_id, event_id, at, status_code, latency_ms)
			SELECT id, endpoint_id, event_id, created_at + interval '40 ms',
			       CASE WHEN status = 'dead' THEN (ARRAY[500, 503, 404, 410])[1 + (hashtext(id::text) & 3)] ELSE 200 END, 12
			FROM d ORDER BY event_id, id`,
			tenant, eps, w.from.UnixMilli(), w.to.UnixMilli(), n, first, last, searchDeadEveryN)
		if err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("seed a chunk: %w", err)
	}
	return nil
}

package db_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"io/fs"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/db"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
)

// uuidAt is a UUIDv7 of time t.
func uuidAt(t time.Time) uuid.UUID {
	var id uuid.UUID
	_, _ = rand.Read(id[:])
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(t.UnixMilli()))
	copy(id[:6], ms[2:])
	id[6] = id[6]&0x0f | 0x70
	id[8] = id[8]&0x3f | 0x80
	return id
}

func provider(t *testing.T, pool *pgxpool.Pool) *goose.Provider {
	t.Helper()
	migrations, err := fs.Sub(db.Migrations, "migrations")
	require.NoError(t, err)
	sqlDB := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = sqlDB.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations)
	require.NoError(t, err)
	return p
}

// TestTimePartitionsMoveAnExistingDatabase: migration 00014 moves the
// events, deliveries and attempts of a database into week partitions (the
// week of each event, however old), and its Down moves them back.
func TestTimePartitionsMoveAnExistingDatabase(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	p := provider(t, pool)
	_, err := p.DownTo(ctx, 13)
	require.NoError(t, err)

	old := time.Now().Add(-20 * 24 * time.Hour)
	tenant, endpoint := uuid.New(), uuid.New()
	oldEvent, newEvent := uuidAt(old), uuidAt(time.Now())
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	exec(`INSERT INTO tenants (id, name, alert_email) VALUES ($1, 'Acme', 'ops@acme.test')`, tenant)
	exec(`INSERT INTO endpoints (id, tenant_id, url, secret_enc) VALUES ($1, $2, 'https://example.com/h', '\x00')`, endpoint, tenant)
	exec(`INSERT INTO events (id, tenant_id, type, payload, idempotency_key, created_at) VALUES
	      ($1, $3, 'old', '{}', 'k-old', $4), ($2, $3, 'new', '{}', 'k-new', now())`, oldEvent, newEvent, tenant, old)
	exec(`INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, status) VALUES
	      ($1, $5, $3, $6, 'old', 'delivered'), ($2, $5, $4, $6, 'new', 'dead')`,
		uuidAt(old), uuidAt(time.Now()), oldEvent, newEvent, tenant, endpoint)
	exec(`INSERT INTO delivery_attempts (delivery_id, endpoint_id, at, status_code, latency_ms)
	      SELECT id, endpoint_id, now(), 200, 5 FROM deliveries`)

	_, err = p.Up(ctx)
	require.NoError(t, err)
	partitions := func(table string) map[string]int {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT tableoid::regclass::text, count(*) FROM `+table+` GROUP BY 1`)
		require.NoError(t, err)
		out := map[string]int{}
		for rows.Next() {
			var name string
			var n int
			require.NoError(t, rows.Scan(&name, &n))
			out[name] = n
		}
		require.NoError(t, rows.Err())
		return out
	}
	oldDay, today := store.PartitionWeek(old).Format("20060102"), store.PartitionWeek(time.Now()).Format("20060102")
	require.Equal(t, map[string]int{"events_" + oldDay: 1, "events_" + today: 1}, partitions("events"))
	require.Equal(t, map[string]int{"deliveries_" + oldDay: 1, "deliveries_" + today: 1}, partitions("deliveries"))
	require.Equal(t, map[string]int{"delivery_attempts_" + oldDay: 1, "delivery_attempts_" + today: 1}, partitions("delivery_attempts"))
	var mismatched int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id
	    WHERE a.event_id <> d.event_id`).Scan(&mismatched))
	require.Zero(t, mismatched, "each attempt carries its delivery's event")
	var newer bool
	require.NoError(t, pool.QueryRow(ctx, `WITH a AS (
	        INSERT INTO delivery_attempts (delivery_id, endpoint_id, event_id, at, latency_ms)
	        SELECT id, endpoint_id, event_id, now(), 1 FROM deliveries WHERE status = 'dead' RETURNING id)
	    SELECT (SELECT id FROM a) > (SELECT max(id) FROM delivery_attempts)`).Scan(&newer))
	require.True(t, newer, "attempt ids go on from the old table's")

	_, err = p.DownTo(ctx, 13)
	require.NoError(t, err)
	var events, deliveries, attempts int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM deliveries),
	    (SELECT count(*) FROM delivery_attempts)`).Scan(&events, &deliveries, &attempts))
	require.Equal(t, []int{2, 2, 3}, []int{events, deliveries, attempts}, "down keeps every row")
	_, err = p.Up(ctx)
	require.NoError(t, err)
}

// TestPayloadsCompressWithLZ4: migration 00051 compresses payloads and
// response bodies with lz4 in every partition that exists and in those
// sluice_ensure_week makes later, and its Down puts pglz back.
func TestPayloadsCompressWithLZ4(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	var lz4 bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT 'lz4' = ANY (enumvals) FROM pg_settings
	    WHERE name = 'default_toast_compression'`).Scan(&lz4))
	if !lz4 {
		t.Skip("this Postgres was built without lz4")
	}
	compression := func() map[string]string {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT c.relname, a.attcompression::text
		    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
		    WHERE (c.relname LIKE 'events%' AND a.attname = 'payload')
		       OR (c.relname LIKE 'delivery_attempts%' AND a.attname = 'response_body')`)
		require.NoError(t, err)
		out := map[string]string{}
		for rows.Next() {
			var rel, method string
			require.NoError(t, rows.Scan(&rel, &method))
			out[rel] = method
		}
		require.NoError(t, rows.Err())
		return out
	}
	// A week three years on, made after the migration, which no other
	// test makes or sees.
	var made bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT sluice_ensure_week(now() + interval '3 years')`).Scan(&made))
	require.True(t, made)
	got := compression()
	require.Greater(t, len(got), 6, "the parents, the kept partitions and the weeks")
	for rel, method := range got {
		require.Equal(t, "l", method, "%s compresses with lz4", rel)
	}

	p := provider(t, pool)
	_, err := p.DownTo(ctx, 50)
	require.NoError(t, err)
	for rel, method := range compression() {
		require.Empty(t, method, "%s is back on the server's default", rel)
	}
	_, err = p.Up(ctx)
	require.NoError(t, err)
}

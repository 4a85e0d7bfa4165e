// Package storetest gives a test a store on its own migrated database,
// with two tenants and a River client that only inserts jobs: what the API
// and dashboard tests stand on.
package storetest

import (
	"bytes"
	"context"
	"net"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/secretbox"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
)

// Fixture is a fresh store with two tenants and their API keys.
type Fixture struct {
	Store   *store.Store
	Jobs    *jobs.Queue // inserts jobs; nothing works them
	TenantA sluice.Tenant
	KeyA    string
	TenantB sluice.Tenant
	KeyB    string
}

// New builds a Fixture on a new database, dropped when the test ends.
func New(t testing.TB) Fixture {
	t.Helper()
	pool := pgtest.NewPool(t)
	return On(t, pool, pool)
}

// On builds a Fixture whose store runs on pool and whose job queue inserts
// through riverPool (the same pool, or one apart whose statements a test
// does not count): the store, the queue and two tenants with their keys.
func On(t testing.TB, pool, riverPool *pgxpool.Pool) Fixture {
	t.Helper()
	ctx := context.Background()
	box, err := secretbox.New(bytes.Repeat([]byte{1}, secretbox.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	f := Fixture{Store: store.New(pool, box)}
	t.Cleanup(f.Store.Close)
	rc, err := river.NewClient(riverpgxv5.New(riverPool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	f.Jobs = jobs.NewQueue(rc)
	f.KeyA, f.KeyB = apikey.New(), apikey.New()
	if f.TenantA, err = f.Store.CreateTenant(ctx, "Acme", "ops@acme.test", apikey.Digest(f.KeyA)); err != nil {
		t.Fatal(err)
	}
	if f.TenantB, err = f.Store.CreateTenant(ctx, "Globex", "ops@globex.test", apikey.Digest(f.KeyB)); err != nil {
		t.Fatal(err)
	}
	return f
}

// Unreachable returns a store on a pool whose server does not exist (a
// loopback port nothing listens on): every query fails the way it does
// while the database is down.
func Unreachable(t testing.TB) *store.Store {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(context.Background(), "postgres://sluice@"+addr+"/sluice?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	box, err := secretbox.New(bytes.Repeat([]byte{1}, secretbox.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(pool, box)
	t.Cleanup(st.Close)
	return st
}

// DeadBacklog gives the endpoint n events of tenantID, each with one dead
// delivery to it, inserted set-based (seconds for a hundred thousand,
// where the API and a dispatcher would take minutes).
func DeadBacklog(t testing.TB, st *store.Store, tenantID, endpointID uuid.UUID, n int) {
	t.Helper()
	const seed = `
WITH ev AS (
    INSERT INTO events (id, tenant_id, type, payload)
    SELECT sluice_uuidv7(), $1, 'backlog', '{}' FROM generate_series(1, $3)
    RETURNING id, tenant_id, type
)
INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, status, attempt_count, failure_count)
SELECT sluice_uuidv7(), tenant_id, id, $2, type, 'dead', 1, 1 FROM ev`
	if _, err := st.Pool().Exec(context.Background(), seed, tenantID, endpointID, n); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(context.Background(), "ANALYZE events, deliveries"); err != nil {
		t.Fatal(err)
	}
}

// Secret is a signing secret for the endpoints a test stores itself
// (store.CreateEndpoint takes the secret its caller made).
const Secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

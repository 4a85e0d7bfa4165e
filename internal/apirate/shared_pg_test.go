package apirate_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// lease calls the LeaseAPITokens statement at a rate too slow to refill
// anything meanwhile.
func lease(t *testing.T, st *store.Store, tenant uuid.UUID, want, owed int64, capacity float64) apirate.TokenGrant {
	t.Helper()
	sent := false
	g, err := apirate.Database(st).LeaseAPITokens(t.Context(), tenant,
		apirate.TokenRequest{Want: want, Owed: owed, Capacity: capacity, PerSecond: 1e-9},
		func() { sent = true })
	require.NoError(t, err)
	require.True(t, sent)
	return g
}

// TestLeaseAPITokens is the shared bucket's statement: a first call makes
// the bucket full, grants are whole tokens up to what it holds, what is
// owed is taken whatever it holds, and a lower capacity caps it.
func TestLeaseAPITokens(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	a := f.TenantA.ID
	g := lease(t, f.Store, a, 4, 0, 10)
	require.EqualValues(t, 4, g.Granted)
	require.InDelta(t, 6, g.Left, 1e-6, "a new bucket starts full")
	g = lease(t, f.Store, a, 10, 0, 10)
	require.EqualValues(t, 6, g.Granted, "what it holds")
	require.InDelta(t, 0, g.Left, 1e-6)
	g = lease(t, f.Store, a, 1, 3, 10)
	require.EqualValues(t, 0, g.Granted)
	require.InDelta(t, -3, g.Left, 1e-6, "in debt")

	b := f.TenantB.ID
	lease(t, f.Store, b, 0, 0, 100)
	g = lease(t, f.Store, b, 1, 0, 5)
	require.EqualValues(t, 1, g.Granted)
	require.InDelta(t, 4, g.Left, 1e-6, "a lower capacity caps the bucket")

	// It refills from the database's clock.
	_, err := f.Store.Pool().Exec(t.Context(), `UPDATE api_buckets SET at = at - interval '2 seconds' WHERE tenant_id = $1`, a)
	require.NoError(t, err)
	g, err = apirate.Database(f.Store).LeaseAPITokens(t.Context(), a, apirate.TokenRequest{Want: 1, Capacity: 10, PerSecond: 2}, func() {})
	require.NoError(t, err)
	require.EqualValues(t, 1, g.Granted, "−3 and 2 s at 2/s")
	require.InDelta(t, 0, g.Left, 0.1, "and what passed since")

	_, err = f.Store.Pool().Exec(t.Context(), `DELETE FROM tenants WHERE id = $1`, b)
	require.NoError(t, err)
	var n int
	require.NoError(t, f.Store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM api_buckets WHERE tenant_id = $1`, b).Scan(&n))
	require.Zero(t, n, "a tenant's bucket goes with it")
}

// TestSharedDatabaseUnreachable: with the database down a request is
// answered an error sluice.Unavailable recognizes (the API's 503), within
// the timeout.
func TestSharedDatabaseUnreachable(t *testing.T) {
	t.Parallel()
	s, err := apirate.NewShared(apirate.SharedConfig{Store: apirate.Database(storetest.Unreachable(t)), Timeout: 3 * time.Second})
	require.NoError(t, err)
	_, err = s.Take(t.Context(), uuid.New(), apirate.MustParse("10/s"), 1)
	require.Error(t, err)
	require.True(t, sluice.Unavailable(err), "%v", err)
}

// BenchmarkSharedTake is the shared limiter's cost per request on a real
// Postgres: one tenant with a rate it never reaches, requests from all
// cores; ns/op includes the leases, and statements/op says how many there
// were per request.
func BenchmarkSharedTake(b *testing.B) {
	f := storetest.New(b)
	st := &countingStore{SharedStore: apirate.Database(f.Store)}
	s, err := apirate.NewShared(apirate.SharedConfig{Store: st})
	require.NoError(b, err)
	rate := apirate.MustParse("999999999/s")
	tenant := f.TenantA.ID
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if res, err := s.Take(ctx, tenant, rate, 1); err != nil || !res.Allowed {
				b.Errorf("take: %v, %+v", err, res)
				return
			}
		}
	})
	b.ReportMetric(float64(st.calls.Load())/float64(b.N), "statements/op")
	b.ReportMetric(float64(st.nanos.Load())/float64(max(1, st.calls.Load()))/1e3, "µs/statement")
}

// BenchmarkLeaseAPITokens is one call on the shared bucket: a round trip
// and the statement.
func BenchmarkLeaseAPITokens(b *testing.B) {
	f := storetest.New(b)
	ctx := context.Background()
	req := apirate.TokenRequest{Want: 1, Capacity: 1e12, PerSecond: 1e12}
	buckets := apirate.Database(f.Store)
	b.ResetTimer()
	for range b.N {
		if _, err := buckets.LeaseAPITokens(ctx, f.TenantA.ID, req, func() {}); err != nil {
			b.Fatal(err)
		}
	}
}

// countingStore counts the calls on the shared bucket and their time.
type countingStore struct {
	apirate.SharedStore
	calls, nanos atomic.Int64
}

func (c *countingStore) LeaseAPITokens(ctx context.Context, tenant uuid.UUID, req apirate.TokenRequest, sending func()) (apirate.TokenGrant, error) {
	start := time.Now()
	defer func() { c.calls.Add(1); c.nanos.Add(int64(time.Since(start))) }()
	return c.SharedStore.LeaseAPITokens(ctx, tenant, req, sending)
}

package store_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestReadLargeLetsTheBufferGo: a 10 MiB payload read by eight
// concurrent ReadLarge calls leaves no connection of the pool holding the
// buffer pgx read it into (16 MiB each), where Read leaves them held.
// What the Go heap keeps once collected tells.
func TestReadLargeLetsTheBufferGo(t *testing.T) {
	f := storetest.New(t)
	ctx := context.Background()
	var eventID uuid.UUID
	payload := `{"blob":"` + strings.Repeat("0123456789abcdef", 10<<20/16) + `"}`
	require.NoError(t, f.Store.Pool().QueryRow(ctx, `INSERT INTO events (id, tenant_id, type, payload)
		VALUES (sluice_uuidv7(), $1, 'large', $2) RETURNING id`, f.TenantA.ID, payload).Scan(&eventID))

	held := func(read func(context.Context, *store.Store, func(*dbq.Queries, context.Context, uuid.UUID) (dbq.LargePayloadRow, error), uuid.UUID) (dbq.LargePayloadRow, error)) uint64 {
		t.Helper()
		before := heapAfterGC()
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				<-start
				row, err := read(ctx, f.Store, (*dbq.Queries).LargePayload, eventID)
				require.NoError(t, err)
				require.Len(t, row.Payload, len(payload))
			})
		}
		close(start)
		wg.Wait()
		return max(heapAfterGC(), before) - before
	}
	read, large := held(store.Read), held(store.ReadLarge)
	t.Logf("held once collected: %d MiB after Read, %d MiB after ReadLarge", read>>20, large>>20)
	require.Greater(t, read, uint64(12<<20), "Read leaves the pool holding a buffer at least")
	require.Less(t, large, uint64(12<<20), "ReadLarge leaves none")
}

// heapAfterGC is the Go heap in use once garbage is collected, twice so
// that pooled buffers are let go too.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

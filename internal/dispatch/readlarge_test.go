package dispatch

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestReadLargeLetsTheBufferGo: a 10 MiB payload read by eight
// concurrent readLarge calls, in pieces, leaves no connection of the pool
// holding a buffer the payload's size, where a read of it whole leaves one
// (16 MiB) on each. What the Go heap keeps once collected tells.
//
// Not parallel: it measures the test process's heap.
func TestReadLargeLetsTheBufferGo(t *testing.T) {
	f := storetest.New(t)
	ctx := context.Background()
	var eventID uuid.UUID
	payload := `{"blob":"` + strings.Repeat("0123456789abcdef", 10<<20/16) + `"}`
	require.NoError(t, f.Store.Pool().QueryRow(ctx, `INSERT INTO events (id, tenant_id, type, payload)
		VALUES (sluice_uuidv7(), $1, 'large', $2) RETURNING id`, f.TenantA.ID, payload).Scan(&eventID))

	held := func(read func() ([]byte, error)) uint64 {
		t.Helper()
		before := heapAfterGC()
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				<-start
				got, err := read()
				require.NoError(t, err)
				require.Equal(t, payload, string(got))
			})
		}
		close(start)
		wg.Wait()
		return max(heapAfterGC(), before) - before
	}
	plain := held(func() ([]byte, error) {
		var got []byte
		err := f.Store.Pool().QueryRow(ctx, `SELECT payload FROM events WHERE id = $1`, eventID).Scan(&got)
		return got, err
	})
	large := held(func() ([]byte, error) {
		got, _, err := readLarge(ctx, f.Store.Pool(), eventID)
		return got, err
	})
	t.Logf("held once collected: %d MiB after a read whole, %d MiB after readLarge", plain>>20, large>>20)
	require.Greater(t, plain, uint64(12<<20), "a read whole leaves the pool holding a buffer at least")
	require.Less(t, large, uint64(12<<20), "readLarge leaves none")
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

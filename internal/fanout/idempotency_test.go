package fanout_test

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestIdempotencyKeyUnderConcurrency: events, partitioned by week, cannot
// hold a unique index on the key, so requests with the same key take an
// advisory lock: of many at once exactly one creates the event, and every
// other answers with it. Another tenant's same key is its own.
func TestIdempotencyKeyUnderConcurrency(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx := t.Context()
	ev := sluice.NewEvent{Type: "pay.done", Payload: []byte(`{"n":1}`), IdempotencyKey: "k-1"}
	const requests = 16
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		ids     = map[uuid.UUID]int{}
		created int
	)
	for range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, isNew, err := fanout.InsertOne(ctx, f.Store, f.TenantA.ID, ev, f.Jobs)
			require.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			ids[got.ID]++
			if isNew {
				created++
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 1, created, "one request creates the event")
	require.Len(t, ids, 1, "every request answers with it")

	other, isNew, err := fanout.InsertOne(ctx, f.Store, f.TenantB.ID, ev, f.Jobs)
	require.NoError(t, err)
	require.True(t, isNew, "another tenant's key is its own")
	require.NotContains(t, ids, other.ID)

	_, _, err = fanout.InsertOne(ctx, f.Store, f.TenantA.ID, sluice.NewEvent{Type: "pay.done", Payload: []byte(`{"n":2}`), IdempotencyKey: "k-1"}, f.Jobs)
	require.ErrorIs(t, err, fanout.ErrIdempotencyMismatch)

	// Past the window the key is free again.
	_, err = f.Store.Pool().Exec(ctx, `UPDATE events SET id = sluice_uuid_at(sluice_uuid_ms(id) - $1::bigint)
	    WHERE tenant_id = $2`, (fanout.IdempotencyWindow + time.Minute).Milliseconds(), f.TenantA.ID)
	require.NoError(t, err)
	again, isNew, err := fanout.InsertOne(ctx, f.Store, f.TenantA.ID, ev, f.Jobs)
	require.NoError(t, err)
	require.True(t, isNew, "a key older than %s creates a new event", fanout.IdempotencyWindow)
	require.NotContains(t, ids, again.ID)
}

// TestIdempotencyKeyComparesMeaning: a retry whose payload is the same
// JSON value spelled otherwise (members reordered, whitespace, 4200.0 or
// 4.2e3 for 4200) answers with the first event; another value is still a
// conflict.
func TestIdempotencyKeyComparesMeaning(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx := t.Context()
	post := func(payload string) (sluice.Event, bool, error) {
		return fanout.InsertOne(ctx, f.Store, f.TenantA.ID,
			sluice.NewEvent{Type: "order.paid", Payload: []byte(payload), IdempotencyKey: "order-1042"}, f.Jobs)
	}
	first, created, err := post(`{"order_id":1042,"total":4200,"lines":[{"sku":"a","qty":1}]}`)
	require.NoError(t, err)
	require.True(t, created)
	for _, same := range []string{
		`{"total":4200,"order_id":1042,"lines":[{"qty":1,"sku":"a"}]}`,
		"{ \"order_id\": 1042,\n  \"total\": 4200,\n  \"lines\": [ { \"sku\": \"a\", \"qty\": 1 } ] }",
		`{"order_id":1042,"total":4200.0,"lines":[{"sku":"a","qty":1.0}]}`,
		`{"order_id":1.042e3,"total":4.2e3,"lines":[{"sku":"\u0061","qty":10e-1}]}`,
	} {
		got, created, err := post(same)
		require.NoError(t, err, same)
		require.False(t, created, same)
		require.Equal(t, first.ID, got.ID, same)
	}
	for _, other := range []string{
		`{"order_id":1042,"total":4201,"lines":[{"sku":"a","qty":1}]}`,
		`{"order_id":1042,"total":"4200","lines":[{"sku":"a","qty":1}]}`,
		`{"order_id":1042,"total":4200,"lines":[{"sku":"a","qty":1}],"note":null}`,
	} {
		_, _, err := post(other)
		require.ErrorIs(t, err, fanout.ErrIdempotencyMismatch, other)
	}
}

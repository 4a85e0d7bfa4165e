package fanout_test

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// BenchmarkSinglePost stores one event at a time for an endpoint
// subscribed to its type, as a lone single post is stored: the event, its
// routing and its delivery, committed (InsertRoutedEvents). Time per
// operation is one post's wall time from Sluice's side, Postgres included:
//
//	go test ./internal/store -run '^$' -bench SinglePost -benchtime 3000x
func BenchmarkSinglePost(b *testing.B) {
	f := storetest.New(b)
	ctx := b.Context()
	subscribed(b, f, "bench.post")
	post := []fanout.TenantEvent{{TenantID: f.TenantA.ID, Event: sluice.NewEvent{Type: "bench.post", Payload: []byte(`{"n":1}`)}}}
	for b.Loop() {
		if _, _, err := fanout.Insert(ctx, f.Store, post, f.Jobs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBatchOverTheInlineLimit posts batches of 100 events to a type
// 100 endpoints subscribe to: 10,000 deliveries, more than are made
// inline, so each batch is stored and its fan-out job queued.
func BenchmarkBatchOverTheInlineLimit(b *testing.B) {
	f := storetest.New(b)
	ctx := b.Context()
	for range 100 {
		subscribed(b, f, "bench.batch")
	}
	batch := make([]fanout.TenantEvent, 100)
	for i := range batch {
		batch[i] = fanout.TenantEvent{TenantID: f.TenantA.ID, Event: sluice.NewEvent{Type: "bench.batch", Payload: []byte(`{"n":1}`)}}
	}
	for b.Loop() {
		if _, touched, err := fanout.Insert(ctx, f.Store, batch, f.Jobs); err != nil || len(touched) > 0 {
			b.Fatalf("made %d endpoints' deliveries inline: %v", len(touched), err)
		}
	}
}

package dispatch_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// largePayload is event i's payload of size bytes, made again from i alone
// so that nobody need keep it: {"blob":"<hex of a seeded stream>"}.
func largePayload(i, size int) []byte {
	rng := rand.NewChaCha8([32]byte{byte(i), byte(i >> 8)})
	raw := make([]byte, (size-len(`{"blob":""}`))/2)
	_, _ = rng.Read(raw)
	b := make([]byte, 0, size)
	b = append(b, `{"blob":"`...)
	b = fmt.Appendf(b, "%x", raw)
	return append(b, `"}`...)
}

// dataHashes is a loopback receiver that discards bodies as they stream
// in, keeping the SHA-256 of each one's "data" (the payload, and the
// envelope's closing brace) by webhook-id, and the bytes it read.
type dataHashes struct {
	srv    *httptest.Server
	mu     sync.Mutex
	hashes map[string][sha256.Size]byte
	bytes  atomic.Int64
	got    chan struct{}
	// arrived, when set, is called as each request arrives, before its
	// body is read.
	arrived func()
}

func newDataHashes(t *testing.T, arrived func()) *dataHashes {
	d := &dataHashes{hashes: map[string][sha256.Size]byte{}, got: make(chan struct{}, 1), arrived: arrived}
	d.srv = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *dataHashes) serve(w http.ResponseWriter, r *http.Request) {
	if d.arrived != nil {
		d.arrived()
	}
	n, sum, err := receiver.HashData(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d.bytes.Add(n)
	d.mu.Lock()
	d.hashes[r.Header.Get("Webhook-Id")] = sum
	d.mu.Unlock()
	select {
	case d.got <- struct{}{}:
	default:
	}
}

func (d *dataHashes) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.hashes)
}

// heapSampler keeps the highest heap in use it was shown: live objects
// and garbage not yet swept alike, as the process holds them.
type heapSampler struct {
	mu   sync.Mutex
	peak uint64
	s    []metrics.Sample
}

func newHeapSampler() *heapSampler {
	return &heapSampler{s: []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}}
}

func (h *heapSampler) sample() {
	h.mu.Lock()
	defer h.mu.Unlock()
	metrics.Read(h.s)
	h.peak = max(h.peak, h.s[0].Value.Uint64())
}

// TestLargePayloadsMemoryBounded delivers twelve events of 8 MiB to four
// endpoints of max_in_flight 1 through a real worker under River, and
// checks that every delivery arrives intact (the SHA-256 of its data) and
// that the heap stays within issue 41's bound of what is in flight: twice
// its bytes (4 × 8 MiB) plus 100 MiB, far below the backlog (48 × 8 MiB,
// all due at once), which a worker that read payloads ahead of sending
// them further than the next batch (readAhead) would exceed, and below one
// that held a copy of the payload per delivery beside its body. The heap is read as each request arrives,
// when the worker holds the bodies in flight, and every few milliseconds
// besides.
//
// Not parallel: it measures the test process's heap, which other tests
// would share, and sets its memory limit.
func TestLargePayloadsMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 384 MiB through Postgres and loopback")
	}
	const (
		size        = 8 << 20
		events      = 12
		endpoints   = 4
		maxInFlight = 1
	)
	inFlight := endpoints * maxInFlight * size
	bound := uint64(inFlight*2 + 100<<20)
	// The collector is held to the bound, as GOMEMLIMIT holds a worker:
	// the heap then measures what the worker keeps alive, not how far
	// the collector lagged behind a machine loaded by other tests. What
	// it keeps alive beyond the bound still breaks it.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(int64(bound)))
	ctx := context.Background()
	f := storetest.New(t)
	heap := newHeapSampler()
	var receivers []*dataHashes
	for i := range endpoints {
		d := newDataHashes(t, heap.sample)
		receivers = append(receivers, d)
		ep, err := f.Store.CreateEndpoint(ctx, f.TenantA.ID, sluice.EndpointSettings{URL: d.srv.URL, MaxInFlight: maxInFlight}, storetest.Secret)
		require.NoError(t, err, "endpoint %d", i)
		_, err = f.Store.CreateSubscription(ctx, f.TenantA.ID, ep.ID, []string{"big.one"}, nil)
		require.NoError(t, err)
	}
	want := map[string][sha256.Size]byte{}
	for i := range events {
		p := largePayload(i, size)
		evs, _, err := fanout.Insert(ctx, f.Store, []fanout.TenantEvent{{TenantID: f.TenantA.ID, Event: sluice.NewEvent{Type: "big.one", Payload: p}}}, f.Jobs)
		require.NoError(t, err)
		want[evs[0].ID.String()] = sha256.Sum256(append(p, '}'))
	}
	runtime.GC()
	heap.mu.Lock()
	heap.peak = 0
	heap.mu.Unlock()
	heap.sample()
	base := heap.peak

	nudger := startWorker(t, f.Store, f.Store.Pool(), endpoints, 30*time.Second)

	var eps []uuid.UUID
	require.NoError(t, f.Store.Pool().QueryRow(ctx, `SELECT array_agg(id) FROM endpoints WHERE tenant_id = $1`, f.TenantA.ID).Scan(&eps))
	start := time.Now()
	require.NoError(t, nudger.Nudge(ctx, eps))
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(2 * time.Minute)
	for done := false; !done; {
		select {
		case <-tick.C:
			heap.sample()
			done = true
			for _, d := range receivers {
				done = done && d.count() == events
			}
		case <-deadline:
			t.Fatalf("not all delivered in 2 minutes")
		}
	}
	took := time.Since(start)

	var delivered int64
	for i, d := range receivers {
		d.mu.Lock()
		require.Equal(t, want, d.hashes, "receiver %d got every payload intact", i)
		d.mu.Unlock()
		delivered += d.bytes.Load()
	}
	require.Less(t, bound, uint64(endpoints*events*size), "the bound is below the backlog")
	t.Logf("%d events of %d MiB to %d endpoints (max_in_flight %d): %.0f MiB in %s, %.0f MB/s; in flight %d MiB; heap %d MiB before, peak %d MiB (bound %d MiB)",
		events, size>>20, endpoints, maxInFlight, float64(delivered)/(1<<20), took.Round(time.Millisecond),
		float64(delivered)/1e6/took.Seconds(), inFlight>>20, base>>20, heap.peak>>20, bound>>20)
	require.LessOrEqual(t, heap.peak, bound, "the heap is bounded by what is in flight")
}

// TestReadAhead: after a full claim that left large payloads out, a run
// reads, once its batch's own are read, the large payloads of the
// deliveries it will claim next (not the small ones, which come with their
// claim) while it sends, and lets them go when it releases them. A claim that came up short, a FIFO endpoint's,
// or one without a large payload reads nothing ahead.
func TestReadAhead(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx := t.Context()
	ep := subscribed(t, f, "big.ahead")
	post := func(payload []byte) uuid.UUID {
		t.Helper()
		stored, _, err := fanout.InsertOne(ctx, f.Store, f.TenantA.ID, sluice.NewEvent{Type: "big.ahead", Payload: payload}, f.Jobs)
		require.NoError(t, err)
		_, _, err = fanout.Events(ctx, f.Store, []uuid.UUID{stored.ID}, nil)
		require.NoError(t, err)
		return stored.ID
	}
	large := func(i int) []byte { return largePayload(i, 2<<20) }
	e0, e1, e2, e3 := post(large(0)), post(large(1)), post(large(2)), post([]byte(`{"small":1}`))
	post(large(4)) // e4, beyond the next claim

	w, err := dispatch.NewWorker(f.Store, dispatch.Config{
		Sender: send.New(send.Config{AllowPrivate: true}), DeliveryTimeout: time.Second,
		Nudger: dispatch.NewNudger(f.Store, f.Jobs, dispatch.NudgerConfig{}),
	})
	require.NoError(t, err)
	t.Cleanup(w.Close)
	db := dispatch.NewDB(f.Store)
	target := dispatch.Target{ID: ep, TenantID: f.TenantA.ID, MaxInFlight: 2}
	claimed, err := db.ClaimUnlocked(ctx, ep, 2)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{e0, e1}, []uuid.UUID{claimed[0].EventID, claimed[1].EventID})

	held, release := w.ReadAhead(ctx, target, 2, dispatch.Claim{Deliveries: claimed})
	require.Equal(t, []uuid.UUID{e2}, held, "the next claim's large payloads (e2, e3: not e4), read while the batch is sent")
	release()
	require.Zero(t, w.UsedPayloads(), "let go of once released")
	require.Equal(t, 3, w.HeldPayloads(), "kept a while for their sends to come: e2, and e0 and e1, read first")

	held, _ = w.ReadAhead(ctx, target, 3, dispatch.Claim{Deliveries: claimed})
	require.Nil(t, held, "a short claim: nothing more is due")
	fifo := target
	fifo.FIFO = true
	held, _ = w.ReadAhead(ctx, fifo, 2, dispatch.Claim{Deliveries: claimed})
	require.Nil(t, held, "a FIFO endpoint's next heads are not known yet")
	small := []dispatch.Claimed{claimed[0], {ID: uuid.New(), EventID: e3, Payload: []byte(`{"small":1}`)}}
	small[0].Payload = []byte(`{}`)
	held, _ = w.ReadAhead(ctx, target, 2, dispatch.Claim{Deliveries: small})
	require.Nil(t, held, "no payload left out: nothing read ahead")
}

// TestLargePayloadKept: a large payload read for one endpoint's send is
// kept for its event's sends to come, so that another endpoint's send,
// after the first is done, does not read it again (the event is changed in
// Postgres meanwhile: a second reading would see it), and is let go of
// after the last of them.
func TestLargePayloadKept(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx := t.Context()
	subscribed(t, f, "big.kept")
	subscribed(t, f, "big.kept")
	payload := largePayload(1, 2<<20)
	stored, _, err := fanout.InsertOne(ctx, f.Store, f.TenantA.ID, sluice.NewEvent{Type: "big.kept", Payload: payload}, f.Jobs)
	require.NoError(t, err)
	_, _, err = fanout.Events(ctx, f.Store, []uuid.UUID{stored.ID}, nil)
	require.NoError(t, err)

	w, err := dispatch.NewWorker(f.Store, dispatch.Config{
		Sender: send.New(send.Config{AllowPrivate: true}), DeliveryTimeout: time.Second,
		Nudger: dispatch.NewNudger(f.Store, f.Jobs, dispatch.NudgerConfig{}),
	})
	require.NoError(t, err)
	t.Cleanup(w.Close)
	sendOnce := func() []byte {
		t.Helper()
		data, release, err := w.SendPayload(ctx, f.TenantA.ID, stored.ID)
		require.NoError(t, err)
		release()
		return data
	}
	require.Equal(t, payload, sendOnce())
	require.Equal(t, 1, w.HeldPayloads(), "kept: one send to come")
	_, err = f.Store.Pool().Exec(ctx, `UPDATE events SET payload = '{"read":"again"}' WHERE id = $1`, stored.ID)
	require.NoError(t, err)
	require.Equal(t, payload, sendOnce(), "the second endpoint's send did not read it again")
	require.Zero(t, w.HeldPayloads(), "let go of after its last send")
}

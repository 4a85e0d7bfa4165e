package httpapi_test

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
	"github.com/sluice-dev/sluice/internal/testkit/dispatchtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// setupLarge is setup with SLUICE_MAX_PAYLOAD at maxPayload and one turn
// for large bodies. Its bound on waiting for the database is a minute: a
// 10 MiB commit on a loaded machine (or under -race) can take longer than
// the default 5 s, and these tests are about sizes, not that bound.
func setupLarge(t *testing.T, maxPayload int) *testBundle {
	t.Helper()
	t.Parallel()
	f := storetest.New(t)
	st := f.Store
	b := &testBundle{t: t, store: st, jobs: f.Jobs, nudger: dispatchtest.Nudger(f.Store, f.Jobs), tenantA: f.TenantA, keyA: f.KeyA, tenantB: f.TenantB, keyB: f.KeyB}
	api := httpapi.New(controltest.New(st, controltest.Options{AllowPrivateTargets: true, Nudger: b.nudger}), httpapi.Config{
		Ingest: httpapi.StartIngest(t, st, b.nudger), Limits: apirate.New(apirate.Config{Tenant: testRate, Rates: st}),
		MaxPayload: maxPayload, MaxLargeBatches: 1, DBTimeout: time.Minute,
	})
	b.handler = api.Handler()
	b.srv = httptest.NewServer(b.handler)
	t.Cleanup(b.srv.Close)
	return b
}

// payloadOf is a JSON object of exactly n bytes whose text does not
// compress: {"blob":"<random base64>"}.
func payloadOf(t *testing.T, n int) string {
	t.Helper()
	const frame = len(`{"blob":""}`)
	raw := make([]byte, (n-frame)*3/4+3)
	_, _ = rand.Read(raw)
	return `{"blob":"` + base64.RawStdEncoding.EncodeToString(raw)[:n-frame] + `"}`
}

// TestLargePayloadStoredOnce posts a 10 MiB payload (SLUICE_MAX_PAYLOAD at
// its ceiling) to ten endpoints: it is taken, one byte more is 413, and
// the payload is stored once, on the event row, whatever the number of
// deliveries: theirs together take a small fraction of one copy.
func TestLargePayloadStoredOnce(t *testing.T) {
	b := setupLarge(t, sluice.MaxPayloadCeiling)
	for range 10 {
		ep := b.createEndpoint(b.keyA, nil)["id"].(string)
		r := b.do(b.keyA, http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": ep, "event_types": []string{"big.*"}})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	}
	payload := payloadOf(t, sluice.MaxPayloadCeiling)
	r := b.do(b.keyA, http.MethodPost, "/v1/events", `{"type":"big.one","payload":`+payload+`}`)
	require.Equal(t, http.StatusAccepted, r.Status, "%.300s", r.Body)
	id := r.JSON(t)["id"].(string)

	p := requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/events", `{"type":"big.one","payload":`+payloadOf(t, sluice.MaxPayloadCeiling+1)+`}`), http.StatusRequestEntityTooLarge)
	require.Contains(t, p["detail"], fmt.Sprintf("at most %d bytes (SLUICE_MAX_PAYLOAD)", sluice.MaxPayloadCeiling))

	var eventBytes, deliveryBytes, deliveries int64
	var same bool
	require.NoError(t, b.store.Pool().QueryRow(t.Context(),
		`SELECT pg_column_size(payload), payload::text = $2 FROM events WHERE id = $1`, id, payload).Scan(&eventBytes, &same))
	require.True(t, same, "the payload is stored byte for byte")
	require.NoError(t, b.store.Pool().QueryRow(t.Context(),
		`SELECT count(*), coalesce(sum(pg_column_size(d.*)), 0) FROM deliveries d WHERE event_id = $1`, id).Scan(&deliveries, &deliveryBytes))
	require.EqualValues(t, 10, deliveries)
	t.Logf("stored: event %d bytes, its %d deliveries %d bytes together (payload %d bytes)", eventBytes, deliveries, deliveryBytes, len(payload))
	require.GreaterOrEqual(t, eventBytes, int64(len(payload)), "the random payload is stored whole, uncompressed")
	require.Less(t, eventBytes, int64(len(payload))+1<<10, "one copy")
	require.Less(t, deliveryBytes, int64(len(payload))/100, "deliveries reference the payload, they hold no copy")
}

// TestLargeBodiesShareTheTurns: with SLUICE_MAX_PAYLOAD above 1 MiB a
// single event's body may be large, and takes one of the turns large
// batches take, so that concurrent large posts cannot exhaust memory; a
// small single event waits for none. A batch is bounded as a whole
// (32 MiB), whatever SLUICE_MAX_PAYLOAD.
func TestLargeBodiesShareTheTurns(t *testing.T) {
	b := setupLarge(t, 4<<20)
	post := func(path string, body string, length int64, header map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.ContentLength = length
		req.Header.Set("Authorization", "Bearer "+b.keyA)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		b.handler.ServeHTTP(w, req)
		return w
	}
	event := `{"type":"big.one","payload":` + payloadOf(t, 3<<20) + `}`
	w := post("/v1/events", event, int64(len(event)), nil)
	require.Equal(t, http.StatusAccepted, w.Code, "%.300s", w.Body)

	// One large body holds the one turn, waiting for the rest of it.
	first := newPendingBody()
	done := make(chan int)
	go func() {
		req := httptest.NewRequest(http.MethodPost, "/v1/events", first)
		req.ContentLength = 2 << 20
		req.Header.Set("Authorization", "Bearer "+b.keyA)
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		b.handler.ServeHTTP(w, req)
		done <- w.Code
	}()
	<-first.read
	for _, length := range []int64{int64(len(event)), -1} {
		w := post("/v1/events", event, length, map[string]string{"Expect": "100-continue"})
		require.Equal(t, http.StatusServiceUnavailable, w.Code, "%.300s", w.Body)
		require.Contains(t, w.Body.String(), "too many large events")
		require.Equal(t, "1", w.Header().Get("Retry-After"))
	}
	w = post("/v1/events/batch", `{"events":[`+event+`]}`, int64(len(event)+13), map[string]string{"Expect": "100-continue"})
	require.Equal(t, http.StatusServiceUnavailable, w.Code, "batches and large events share the turns: %.300s", w.Body)
	small := `{"type":"big.one","payload":{}}`
	w = post("/v1/events", small, int64(len(small)), nil)
	require.Equal(t, http.StatusAccepted, w.Code, "a small event waits for no turn: %s", w.Body)
	close(first.release)
	require.Equal(t, http.StatusBadRequest, <-done, "the cut-off first body is malformed")

	// A batch's body is bounded as a whole: nine payloads of 4 MiB less a
	// little each are within SLUICE_MAX_PAYLOAD, but not within 32 MiB.
	one := `{"type":"big.one","payload":` + payloadOf(t, 4<<20-64) + `}`
	batch := `{"events":[` + strings.Repeat(one+",", 8) + one + `]}`
	w = post("/v1/events/batch", batch, int64(len(batch)), nil)
	require.Equal(t, http.StatusRequestEntityTooLarge, w.Code, "%.300s", w.Body)
	require.Contains(t, w.Body.String(), fmt.Sprintf("exceeds %d bytes", 32<<20))
}

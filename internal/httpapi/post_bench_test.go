package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
	"github.com/sluice-dev/sluice/internal/testkit/dispatchtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// BenchmarkPostEvent is one POST /v1/events through the API's whole
// router (authentication, rate limit, decoding, the group commit,
// Postgres included), in process, one at a time.
//
//	bash scripts/withpg.sh go test ./internal/httpapi -run '^$' -bench PostEvent -benchtime 3000x
func BenchmarkPostEvent(b *testing.B) {
	f := storetest.New(b)
	a := httpapi.New(controltest.New(f.Store, controltest.Options{Nudger: dispatchtest.Nudger(f.Store, f.Jobs)}), httpapi.Config{Ingest: httpapi.StartIngest(b, f.Store, dispatchtest.Nudger(f.Store, f.Jobs)), APIRate: testRate})
	benchRequests(b, a.Handler(), http.MethodPost, "/v1/events", `{"type":"bench.post","payload":{"n":1}}`, f.KeyA, http.StatusAccepted, nil)
}

// BenchmarkUnmatchedRoute is the /v1 middleware alone, without the
// database: a request of a key in steady use (cached) to a route that
// does not exist.
func BenchmarkUnmatchedRoute(b *testing.B) {
	f := storetest.New(b)
	a := httpapi.New(controltest.New(f.Store, controltest.Options{Nudger: dispatchtest.Nudger(f.Store, f.Jobs)}), httpapi.Config{APIRate: testRate})
	benchRequests(b, a.Handler(), http.MethodGet, "/v1/nothing", "", f.KeyA, http.StatusNotFound, nil)
}

// benchRequests serves one request per iteration, with the headers
// given, and requires its status.
func benchRequests(b *testing.B, h http.Handler, method, path, body, key string, status int, header map[string]string) {
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != status {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}

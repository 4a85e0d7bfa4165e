package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluice-dev/sluice/internal/testkit/controltest"
	"github.com/sluice-dev/sluice/internal/testkit/dispatchtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// BenchmarkAuthenticate is the cost the auth middleware adds to a request
// of a key in steady use: the cache's fast path, with its occasional
// database re-check amortised in.
func BenchmarkAuthenticate(b *testing.B) {
	f := storetest.New(b)
	a := New(controltest.New(f.Store, controltest.Options{Nudger: dispatchtest.Nudger(f.Store, f.Jobs)}), Config{})
	h := a.authenticate(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req := httptest.NewRequest(http.MethodGet, "/v1/endpoints", nil)
	req.Header.Set("Authorization", "Bearer "+f.KeyA)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}

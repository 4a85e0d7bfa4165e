package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
	"github.com/sluice-dev/sluice/internal/testkit/dispatchtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// BenchmarkLimitRate is the cost the rate-limit middleware adds to an
// authenticated request: the tenant's rate from its cache (re-read from
// the database once a second, amortised in), a token from its bucket and
// the three RateLimit headers.
func BenchmarkLimitRate(b *testing.B) {
	f := storetest.New(b)
	a := New(controltest.New(f.Store, controltest.Options{Nudger: dispatchtest.Nudger(f.Store, f.Jobs)}), Config{APIRate: apirate.MustParse("999999999/s")})
	h := a.limitRate(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req := httptest.NewRequest(http.MethodGet, "/v1/endpoints", nil)
	req = req.WithContext(context.WithValue(req.Context(), tenantKey{}, f.TenantA))
	w := httptest.NewRecorder()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		h.ServeHTTP(w, req)
	}
	if w.Code != http.StatusOK {
		b.Fatalf("status %d", w.Code)
	}
}

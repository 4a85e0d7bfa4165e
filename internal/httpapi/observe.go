package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/sluice-dev/sluice/internal/metrics"
)

// observeRequests counts each /v1 request by its route pattern (bounded:
// /v1/endpoints/{id}, never an id) and status, and times it.
func observeRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		metrics.APIRequests.WithLabelValues(route, strconv.Itoa(status)).Inc()
		metrics.APISeconds.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// Package httpapi is Sluice's REST API under /v1: a chi router, bearer-key
// auth, one file per resource, and one table (errors.go) that turns errors
// into RFC 9457 problem responses.
package httpapi

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/dbwait"
	"github.com/sluice-dev/sluice/internal/eventschema"
	"github.com/sluice-dev/sluice/internal/ingest"
	"github.com/sluice-dev/sluice/internal/poll"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/tracing"
)

// Config is what the API needs besides its control layer.
type Config struct {
	// Ingest commits posted events and hands their deliveries to dispatch;
	// whoever builds the API starts and stops it.
	Ingest *ingest.Ingester
	// Gatherer serves /metrics; nil means the Prometheus default registry.
	Gatherer prometheus.Gatherer
	// MetricsElsewhere leaves /metrics out of Mount: the process serves it
	// on a listener of its own (SLUICE_METRICS_ADDR).
	MetricsElsewhere bool
	// Limits are the rate limits the API shares with the dashboard and
	// the portal of the same process: the tenants' buckets and the failed
	// authentications per client address. Nil means limits of the API's
	// own, at APIRate.
	Limits *apirate.Limits
	// APIRate is the rate of tenants without their own, when Limits is
	// nil; zero means apirate.DefaultRate.
	APIRate apirate.Rate
	// MaxLargeBatches is how many large bodies (batches, or single events,
	// over 1 MiB) are read at once; zero means DefaultMaxLargeBatches.
	MaxLargeBatches int
	// MaxPayload is the largest event payload taken, in bytes
	// (SLUICE_MAX_PAYLOAD); zero means sluice.DefaultMaxPayload.
	MaxPayload int
	Logger     *slog.Logger
	// DBTimeout bounds how long a /v1 request, and /readyz, wait on the
	// database (dbwait); zero means dbwait.DefaultTimeout.
	DBTimeout time.Duration
	// Tracing gives each /v1 request a span (trace.go). Nil, or off: none.
	Tracing *tracing.Provider
}

// API serves the /v1 routes.
type API struct {
	draining atomic.Bool // set by Drain: /readyz answers 503
	ctl      *control.Control
	cfg      Config
	logger   *slog.Logger
	keys     *keyCache
	ingest   *ingest.Ingester
	limits   *limits
	schemas  *eventschema.Cache
	poll     *poll.Reader
}

// New returns the API over ctl, which runs every operation it offers.
func New(ctl *control.Control, cfg Config) *API {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.DefaultGatherer
	}
	if cfg.Limits == nil {
		cfg.Limits = apirate.New(apirate.Config{Tenant: cfg.APIRate, Rates: ctl})
	}
	cfg.MaxLargeBatches = cmp.Or(cfg.MaxLargeBatches, DefaultMaxLargeBatches)
	cfg.MaxPayload = min(cmp.Or(cfg.MaxPayload, sluice.DefaultMaxPayload), sluice.MaxPayloadCeiling)
	cfg.DBTimeout = cmp.Or(cfg.DBTimeout, dbwait.DefaultTimeout)
	return &API{
		ctl: ctl, cfg: cfg, logger: cfg.Logger,
		keys:    newKeyCache(keyCacheTTL, 10000),
		ingest:  cfg.Ingest,
		limits:  &limits{rate: cfg.Limits, batches: make(chan struct{}, cfg.MaxLargeBatches)},
		schemas: ctl.EventSchemas(),
		poll:    ctl.Poll(),
	}
}

// Mount adds the health, metrics (unless Config.MetricsElsewhere) and /v1
// routes to r.
func (a *API) Mount(r chi.Router) {
	r.Get("/healthz", a.healthz)
	r.Get("/readyz", a.readyz)
	if !a.cfg.MetricsElsewhere {
		r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(a.cfg.Gatherer, promhttp.HandlerOpts{}))
	}
	// Pull delivery: outside /v1, with no API key; the token is the
	// credential (readPoll).
	r.With(observeRequests, middleware.Recoverer, dbwait.Bound(a.cfg.DBTimeout), a.checkText).
		Get("/poll/{token}", a.handle(a.readPoll))
	// The tenants' JWKS: public, with no API key (jwks.go).
	r.With(observeRequests, middleware.Recoverer, dbwait.Bound(a.cfg.DBTimeout)).
		Get(JWKSPath, a.handle(a.getJWKS))
	r.Route("/v1", func(r chi.Router) {
		if a.cfg.Tracing.Enabled() {
			r.Use(traceRequests(a.cfg.Tracing))
		}
		// Everything after Recoverer, authentication included, waits on
		// the database within the bound.
		r.Use(observeRequests, middleware.Recoverer, dbwait.Bound(a.cfg.DBTimeout))
		r.Use(a.authenticate, a.limitRate, refuseDisabled, a.checkText, a.requireJSON)
		r.NotFound(a.handle(routeNotFound))
		r.MethodNotAllowed(a.handle(methodNotAllowed))

		r.Post("/api-keys", a.handle(a.createAPIKey))
		r.Get("/api-keys", a.handle(a.listAPIKeys))
		r.Delete("/api-keys/{id}", a.handle(a.revokeAPIKey))

		r.Put("/consumers/{uid}", a.handle(a.putConsumer))
		r.Get("/consumers", a.handle(a.listConsumers))
		r.Get("/consumers/{uid}", a.handle(a.getConsumer))
		r.Delete("/consumers/{uid}", a.handle(a.deleteConsumer))
		r.Post("/consumers/{uid}/portal", a.handle(a.createPortalLink))
		r.Post("/consumers/{uid}/portal/revoke", a.handle(a.revokePortal))

		r.Put("/event-types/{name}", a.handle(a.putEventType))
		r.Get("/event-types", a.handle(a.listEventTypes))
		r.Get("/event-types/{name}", a.handle(a.getEventType))
		r.Delete("/event-types/{name}", a.handle(a.deleteEventType))

		r.Post("/endpoints", a.handle(a.createEndpoint))
		r.Get("/endpoints", a.handle(a.listEndpoints))
		r.Get("/endpoints/{id}", a.handle(a.getEndpoint))
		r.Patch("/endpoints/{id}", a.handle(a.updateEndpoint))
		r.Delete("/endpoints/{id}", a.handle(a.deleteEndpoint))
		r.Get("/endpoints/{id}/secret", a.handle(a.getEndpointSecret))
		r.Post("/endpoints/{id}/secret/rotate", a.handle(a.rotateEndpointSecret))

		r.Post("/endpoints/{id}/test", a.handle(a.testEndpoint))
		r.Post("/endpoints/{id}/replay", a.handle(a.replayEndpoint))
		r.Post("/endpoints/{id}/circuit/close", a.handle(a.closeCircuit))
		r.Post("/endpoints/{id}/verify", a.handle(a.verifyEndpoint))

		r.Post("/subscriptions", a.handle(a.createSubscription))
		r.Get("/subscriptions", a.handle(a.listSubscriptions))
		r.Get("/subscriptions/{id}", a.handle(a.getSubscription))
		r.Delete("/subscriptions/{id}", a.handle(a.deleteSubscription))

		r.Post("/events", a.handle(a.createEvent))
		r.Post("/events/batch", a.handle(a.createEventBatch))
		r.Get("/events", a.handle(a.listEvents))
		r.Get("/events/{id}", a.handle(a.getEvent))

		r.Get("/audit-log", a.handle(a.listAuditLog))

		r.Get("/tenant", a.handle(a.getTenant))
		r.Patch("/tenant", a.handle(a.updateTenant))

		r.Post("/members", a.handle(a.createMember))
		r.Get("/members", a.handle(a.listMembers))
		r.Get("/members/{id}", a.handle(a.getMember))
		r.Patch("/members/{id}", a.handle(a.updateMember))
		r.Delete("/members/{id}", a.handle(a.deleteMember))

		r.Get("/deliveries", a.handle(a.listDeliveries))
		r.Get("/deliveries/{id}", a.handle(a.getDelivery))
		r.Post("/deliveries/{id}/replay", a.handle(a.replayDelivery))
		r.Post("/deliveries/{id}/retry", a.handle(a.retryDelivery))
	})
}

// Handler returns a router serving only the API, for tests and for
// processes that serve the API alone.
func (a *API) Handler() http.Handler {
	r := chi.NewRouter()
	a.Mount(r)
	return r
}

func (a *API) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": sluice.VersionString()})
}

// Drain makes /readyz answer 503 from now on, so load balancers stop
// sending requests while the server finishes the ones it has.
func (a *API) Drain() {
	a.draining.Store(true)
	a.poll.Drain()
}

func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	if a.draining.Load() {
		writeProblem(w, &Problem{Type: typeUnavailable, Title: "Not ready", Status: http.StatusServiceUnavailable,
			Detail: "shutting down", RetryAfter: unavailableRetryAfter})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.DBTimeout)
	defer cancel()
	if err := a.ctl.Ping(ctx); err != nil {
		writeProblem(w, &Problem{Type: typeUnavailable, Title: "Not ready", Status: http.StatusServiceUnavailable,
			Detail: "database unreachable", RetryAfter: unavailableRetryAfter})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": sluice.VersionString()})
}

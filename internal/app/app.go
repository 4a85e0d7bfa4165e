// Package app wires Sluice's parts into a running process: it opens the
// database, builds the store, API, workers and dashboard a role needs, and
// runs them until the context ends.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/dashboard"
	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/ingest"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/operator"
	"github.com/sluice-dev/sluice/internal/poll"
	"github.com/sluice-dev/sluice/internal/secretbox"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/tracing"
)

// Roles choose what a serve process runs.
type Roles struct {
	API       bool
	Worker    bool
	Dashboard bool
}

// OpenPool connects to cfg.DatabaseURL with a pool sized for the roles.
func OpenPool(ctx context.Context, cfg config.Config) (*pgxpool.Pool, error) {
	pool, _, err := openPool(ctx, cfg, strandedByReplication)
	return pool, err
}

// openPool is OpenPool with the check that tells a primary left behind;
// it also returns the pool's connections, tracked when it has several
// hosts (nil otherwise).
func openPool(ctx context.Context, cfg config.Config, stranded strandedFunc) (*pgxpool.Pool, *connSet, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	store.ConfigurePool(pcfg)
	conns := configurePool(pcfg, cfg, stranded) // pool.go
	behindPooler(pcfg, cfg)                     // session.go
	if pcfg.MaxConns < 40 {
		pcfg.MaxConns = 40 // dispatch runs hold a connection only per step
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, nil, fmt.Errorf("open pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("connect to database: %w", err)
	}
	return pool, conns, nil
}

// OpenSessionPool is OpenPool on SLUICE_DATABASE_SESSION_URL when it is
// set: for migrate, whose lock is held by a session.
func OpenSessionPool(ctx context.Context, cfg config.Config) (*pgxpool.Pool, error) {
	if cfg.DatabaseSessionURL != "" {
		cfg.DatabaseURL, cfg.DatabaseSessionURL = cfg.DatabaseSessionURL, ""
	}
	return OpenPool(ctx, cfg)
}

// NewStore opens the store with the configured encryption key; with
// SLUICE_DATABASE_SESSION_URL set, pool is taken to be behind a pooler in
// transaction mode.
func NewStore(pool *pgxpool.Pool, cfg config.Config) (*store.Store, error) {
	box, err := secretbox.New(cfg.EncryptionKey, cfg.PreviousEncryptionKey)
	if err != nil {
		return nil, err
	}
	st := store.New(pool, box)
	st.SealPayloads(secretbox.NewPayloads(box, DataKeys(st), secretbox.PayloadsConfig{Seal: cfg.PayloadEncryption}))
	if cfg.DatabaseSessionURL != "" {
		st.BehindPooler()
	}
	return st, nil
}

// Process is the parts of one Sluice process, wired.
type Process struct {
	Pool    *pgxpool.Pool
	Store   *store.Store
	River   *river.Client[pgx.Tx]
	Handler http.Handler // API and/or dashboard routes, as the roles say
	session *sessions    // what needs a session of its own connects there
	api     *httpapi.API
	ingest  *ingest.Ingester // nil without the API role
	nudger  *dispatch.Nudger // starts and nudges dispatch runs, and queues every job
	workers *workers         // nil without the worker role
	ui      *operator.UI     // nil unless SLUICE_OPERATOR_TOKEN is set
	tracing *tracing.Provider
	stopUI  context.CancelFunc
	stop    context.CancelFunc
	// stopWatch ends the leader watch (leader.go), when one runs; watched
	// is closed once it has.
	stopWatch context.CancelFunc
	watched   chan struct{}
	dbTimeout time.Duration
	conns     *connSet // the pool's connections, with several hosts
	roles     Roles
	logger    *slog.Logger

	// gatherer is what the process's /metrics shows: with the API role,
	// its gauges read from the database besides the default registry.
	gatherer prometheus.Gatherer
}

// New opens the database and builds what the roles need; Start runs it.
func New(ctx context.Context, cfg config.Config, roles Roles, logger *slog.Logger) (*Process, error) {
	pool, conns, err := openPool(ctx, cfg, strandedByReplication)
	if err != nil {
		return nil, err
	}
	p := &Process{Pool: pool, conns: conns, roles: roles, logger: logger, gatherer: prometheus.DefaultGatherer, dbTimeout: cfg.DBTimeout}
	if p.Store, err = NewStore(pool, cfg); err != nil {
		pool.Close()
		return nil, err
	}
	if p.tracing, err = tracing.New(ctx, cfg.Tracing); err != nil {
		pool.Close()
		return nil, err
	}
	if p.session, err = openSessions(ctx, cfg, pool); err != nil {
		p.abandon()
		return nil, err
	}
	if p.River, p.nudger, p.workers, err = NewRiver(pool, p.session, p.Store, cfg, roles.Worker, p.tracing, logger); err != nil {
		p.abandon()
		return nil, err
	}
	router := chi.NewRouter()
	// One set of rate limits for every door: a tenant's API, dashboard and
	// portal requests draw from one bucket, shared with every other process
	// through Postgres.
	buckets, err := apirate.NewShared(apirate.SharedConfig{Store: apirate.Database(p.Store), Timeout: cfg.DBTimeout})
	if err != nil {
		pool.Close()
		return nil, err
	}
	limits := apirate.New(apirate.Config{Tenant: cfg.APIRate, Rates: p.Store, Buckets: buckets})
	// One poll reader and one control layer for every door of the process.
	reader := poll.New(poll.Config{Store: p.Store, Nudger: p.nudger})
	switch mm := control.MemberMailOf(cfg.SMTPURL, cfg.DevMailLog); {
	case mm == control.MemberMailNone && (roles.API || roles.Dashboard):
		logger.Warn("SLUICE_SMTP_URL is not set: no email is sent, and inviting a member or resetting a password answers 409")
	case mm == control.MemberMailLog:
		logger.Warn("SLUICE_SMTP_URL is not set: members' invitation and password-reset links are written to this log (SLUICE_DEV_MAIL_LOG)")
	}
	ctl := control.New(control.Config{Store: p.Store, Nudger: p.nudger, Poll: reader,
		AllowPrivateTargets: cfg.AllowPrivateTargets, PublicURL: cfg.PublicURL, Logger: logger,
		PortalKey: cfg.EncryptionKey, MemberMail: control.MemberMailOf(cfg.SMTPURL, cfg.DevMailLog),
		Retention: cfg.Retention, DeadRetention: cfg.DeadRetention})
	if roles.API {
		p.ingest, err = ingest.New(p.Store, ingest.Config{Nudger: p.nudger, Logger: logger, Tracing: p.tracing})
		if err != nil {
			p.abandon()
			return nil, err
		}
		own := prometheus.NewRegistry()
		own.MustRegister(metrics.NewQueueCollector(p.Store))
		p.gatherer = prometheus.Gatherers{prometheus.DefaultGatherer, own}
		p.api = httpapi.New(ctl, httpapi.Config{
			Gatherer:         p.gatherer,
			MetricsElsewhere: cfg.MetricsAddr != "",
			Limits:           limits,
			Ingest:           p.ingest,
			Logger:           logger,
			DBTimeout:        cfg.DBTimeout,
			Tracing:          p.tracing,
			MaxPayload:       cfg.MaxPayload,
		})
		p.api.Mount(router)
	}
	if roles.Dashboard {
		dashboard.New(ctl, dashboard.Config{
			Key: cfg.EncryptionKey, Logger: logger, Limits: limits,
			SecureCookies: strings.HasPrefix(strings.ToLower(cfg.PublicURL), "https:"),
		}).Mount(router)
	}
	if (roles.API || roles.Dashboard) && cfg.OperatorToken != "" {
		if p.ui, err = operator.New(p.River, cfg.OperatorToken, logger); err != nil {
			p.abandon()
			return nil, err
		}
		p.ui.Mount(router)
	}
	// Every door sees the client behind a trusted proxy (SLUICE_TRUSTED_PROXIES).
	p.Handler = apirate.TrustProxies(cfg.TrustedProxies, router)
	return p, nil
}

// abandon releases what New had made when it fails.
func (p *Process) abandon() {
	_ = p.tracing.Shutdown(context.Background())
	if p.Store != nil {
		p.Store.Close()
	}
	p.session.close()
	p.Pool.Close()
}

// Start starts the API's ingester and the workers, when this process has
// them, and the operator UI's background services.
func (p *Process) Start(ctx context.Context) error {
	if p.conns != nil {
		watchCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
		p.stopWatch, p.watched = stop, make(chan struct{})
		w := leaderWatch{pool: p.Pool, stranded: strandedByReplication, interval: LeaderCheckInterval,
			timeout: cmp.Or(p.dbTimeout, config.DefaultDBTimeout), conns: p.conns, logger: p.logger}
		go func() {
			defer close(p.watched)
			w.run(watchCtx)
		}()
	}
	if p.ingest != nil {
		// Not ctx itself: requests still arrive while the server drains
		// after SIGTERM; Close stops the ingester once they are done.
		if err := p.ingest.Start(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("start ingest: %w", err)
		}
	}
	if p.ui != nil {
		uiCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
		p.stopUI = stop
		if err := p.ui.Start(uiCtx); err != nil {
			return fmt.Errorf("start operator UI: %w", err)
		}
	}
	if !p.roles.Worker {
		if p.roles.API {
			// Its listener wakes this process's waiting poll requests
			// when another process commits their deliveries.
			bgCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
			p.stop = stop
			if err := p.nudger.Start(bgCtx); err != nil {
				stop()
				return fmt.Errorf("start dispatch nudger: %w", err)
			}
		}
		return nil
	}
	// SIGTERM ends ctx, and the leases must outlive the runs River lets
	// finish after it: Close stops them once River has stopped.
	if err := p.workers.leases.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("start leases: %w", err)
	}
	// Not ctx itself: River treats the end of Start's context as an abrupt
	// stop that cancels running jobs, cutting requests in flight. SIGTERM
	// ends ctx; Close stops River gently.
	if err := p.River.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("start workers: %w", err)
	}
	bgCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p.stop = stop
	if err := p.workers.sweeper.Start(bgCtx); err != nil {
		stop()
		return fmt.Errorf("start sweeper: %w", err)
	}
	if err := p.nudger.Start(bgCtx); err != nil {
		stop()
		return fmt.Errorf("start dispatch nudger: %w", err)
	}
	return nil
}

// Close stops the API's ingester (after its commits in flight) and the
// workers, exports the spans they left (within tracing.ShutdownTimeout),
// and closes the database pools. Call it after the HTTP server has
// stopped.
func (p *Process) Close() {
	if p.ingest != nil {
		p.ingest.Stop()
	}
	if p.stopUI != nil {
		p.stopUI()
	}
	if p.stop != nil {
		p.stop()
		if p.workers != nil {
			p.workers.sweeper.Stop()
		}
	}
	if !p.roles.Worker {
		p.nudger.Stop() // an API process's listener, if started
	}
	if p.roles.Worker {
		p.nudger.Stop()           // its listener and alarm; lingering runs stop lingering
		p.workers.dispatch.Stop() // runs yield instead of waiting
		stopRiver(p.River, p.logger)
	}
	p.workers.close()
	if err := p.tracing.Shutdown(context.Background()); err != nil {
		p.logger.Warn("traces not all exported", "err", err)
	}
	if p.stopWatch != nil {
		p.stopWatch()
		<-p.watched
	}
	p.Store.Close()
	p.session.close()
	p.Pool.Close()
}

// Serve runs the chosen roles until ctx ends, then shuts down gracefully.
func Serve(ctx context.Context, cfg config.Config, roles Roles, logger *slog.Logger) error {
	if cfg.Tracing.Enabled() {
		// The SDK reports failed exports through OpenTelemetry's global
		// handler; this process has one Provider, so the global is its.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { logger.Warn("tracing", "err", err) }))
		logger.Info("tracing: exporting spans", "url", cfg.Tracing.URL)
	}
	p, err := New(ctx, cfg, roles, logger)
	if err != nil {
		return err
	}
	defer p.Close()
	if err := p.Start(ctx); err != nil {
		return err
	}
	if cfg.DebugAddr != "" {
		go func() { _ = listen(ctx, cfg.DebugAddr, debugHandler(), logger, nil) }()
	}
	var probes *probeListener
	if !roles.API && cfg.HealthAddr != "" {
		if probes, err = listenProbes(cfg.HealthAddr, p.Store, cfg.DBTimeout, cfg.MetricsAddr == ""); err != nil {
			return err
		}
	}
	if cfg.MetricsAddr != "" {
		ln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("listen on SLUICE_METRICS_ADDR: %w", err)
		}
		go func() { _ = serveOn(ctx, ln, metricsHandler(p.gatherer), logger.With("metrics", "/metrics"), nil) }()
	}
	if !roles.API && !roles.Dashboard {
		logger.Info("ready: working jobs", "version", sluice.VersionString())
		if probes != nil {
			err = probes.serve(ctx, logger) // until ctx ends
		} else {
			<-ctx.Done()
		}
		logger.Info("shutting down: finishing in-flight deliveries")
		return err
	}
	if probes != nil {
		go func() { _ = probes.serve(ctx, logger) }()
	}
	drain := func() {
		if p.api != nil {
			p.api.Drain()
		}
		logger.Info("shutting down: /readyz answers 503", "drain_delay", cfg.DrainDelay)
		time.Sleep(cfg.DrainDelay)
	}
	return listen(ctx, cfg.Addr, p.Handler, logger, drain)
}

// stopRiver lets running jobs finish (a dispatch run ends within seconds),
// then cancels what is left; River snoozes cancelled work for the next start.
func stopRiver(rc *river.Client[pgx.Tx], logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rc.Stop(ctx); err != nil {
		logger.Warn("workers did not stop in time; cancelling", "err", err)
		_ = rc.StopAndCancel(context.Background())
	}
}

// listen serves h on addr until ctx ends, then runs drain (nil: none) and
// shuts the server down, letting requests in progress finish.
func listen(ctx context.Context, addr string, h http.Handler, logger *slog.Logger, drain func()) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	return serveOn(ctx, ln, h, logger, drain)
}

// serveOn is listen on a listener already bound.
func serveOn(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger, drain func()) error {
	srv := NewHTTPServer(h)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("ready: listening", "url", "http://"+ln.Addr().String(), "version", sluice.VersionString())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	if drain != nil {
		drain()
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shut down server: %w", err)
	}
	return nil
}

// Bounds of every request the HTTP server reads.
const (
	// ReadHeaderTimeout is how long a client has to send a request's
	// headers.
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout is how long a client has to send a whole request, body
	// included: a 32 MiB batch at 1.1 MiB/s fits, a connection trickling a
	// byte at a time is cut.
	ReadTimeout = 30 * time.Second
	// IdleTimeout is how long a keep-alive connection waits for its next
	// request.
	IdleTimeout = 2 * time.Minute
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes = 64 << 10
)

// NewHTTPServer is the HTTP server of API and dashboard, with its bounds
// on every request (bodies are bounded by the handlers).
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}

// debugHandler serves Go's pprof profiles, on SLUICE_DEBUG_ADDR only: keep
// that address private.
func debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

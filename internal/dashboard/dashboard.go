// Package dashboard is Sluice's browser dashboard: a chi sub-router of
// server-rendered pages (the templ components of package web) over the
// control layer. It signs in with an API key or a member's email and password,
// keeps the session on the server with only a random token in the cookie
// (session.go), protects every form with a CSRF token (csrf.go) and needs
// no JavaScript. Handlers live one file
// per page group and return errors to one error handler (errors.go).
package dashboard

import (
	"bytes"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/member"
	"github.com/sluice-dev/sluice/web"
)

// Config is what the dashboard needs besides its control layer.
type Config struct {
	// Key is SLUICE_ENCRYPTION_KEY. The CSRF key is derived from it; it is
	// never used as is.
	Key []byte
	// SecureCookies marks the session cookie Secure on every answer; set it
	// when SLUICE_PUBLIC_URL is https (a TLS proxy in front may not say
	// X-Forwarded-Proto, or may not be among SLUICE_TRUSTED_PROXIES).
	SecureCookies bool
	// Logger records internal errors; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock of the charts and of "next attempt"; nil means
	// time.Now.
	Now func() time.Time
	// Limits are the rate limits the dashboard and the portal share with
	// the API of the same process (ratelimit.go); nil means limits of the
	// dashboard's own, at apirate's defaults.
	Limits *apirate.Limits
}

// Dashboard serves the dashboard's pages.
type Dashboard struct {
	ctl    *control.Control
	logger *slog.Logger
	csrf   csrfSigner
	limits *apirate.Limits

	now func() time.Time

	secureCookies bool
}

// New returns the dashboard over ctl, which runs every operation its
// pages offer. It panics when cfg.Key is empty: without a key no session
// could be trusted.
func New(ctl *control.Control, cfg Config) *Dashboard {
	if len(cfg.Key) == 0 {
		panic("dashboard: Config.Key is empty")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Limits == nil {
		cfg.Limits = apirate.New(apirate.Config{Rates: ctl})
	}
	return &Dashboard{
		ctl:    ctl,
		logger: cfg.Logger,
		csrf:   csrfSigner{key: deriveKey(cfg.Key, csrfKeyLabel)},
		limits: cfg.Limits,

		secureCookies: cfg.SecureCookies,
		now:           cfg.Now,
	}
}

// Mount adds the dashboard's routes to r, at its root: the pages, /login,
// /logout, /portal (where portal links point) and /static/. It also makes
// r answer unknown paths with the dashboard's 404 page (sub-routers with
// their own, like /v1, keep theirs).
//
// Every page behind a session sees it through its scope (scope.go). A
// read-only session's non-GET requests are refused whatever their route
// (readOnlyGuard); a member's role is checked against the action or page
// of its route (authorized); pages that only lead to a change are refused
// to read-only sessions and viewers outright (writersOnly); the tenant's
// own pages answer 404 to portal sessions (tenantOnly). /password and
// /forgot set a member's password from an emailed link (password.go).
func (d *Dashboard) Mount(r chi.Router) {
	r.Group(func(r chi.Router) {
		r.Use(middleware.Recoverer, securityHeaders, d.crossOrigin, d.checkText)
		r.Handle(web.StaticPrefix+"*", staticHandler(web.Static()))
		r.Get("/favicon.ico", favicon(web.Static()))
		r.Get("/login", d.handle(d.loginForm))
		r.Post("/login", d.handle(d.login))
		r.Post("/logout", d.handle(d.logout))
		r.Get(control.PortalPath, d.handle(d.openPortal))
		r.Get(member.PasswordPath, d.handle(d.passwordForm))
		r.Post(member.PasswordPath, d.handle(d.setPassword))
		r.Get("/forgot", d.handle(d.forgotForm))
		r.Post("/forgot", d.handle(d.forgot))

		r.Group(func(r chi.Router) {
			r.Use(d.requireSession, d.readOnlyGuard, d.requireCSRF)
			d.readRoutes(r)
			r.Group(func(r chi.Router) {
				r.Use(d.writersOnly)
				d.writeRoutes(r)
			})
			r.Group(func(r chi.Router) {
				r.Use(d.tenantOnly)
				d.tenantRoutes(r)
			})
		})
	})
	r.NotFound(securityHeaders(d.handle(d.notFound)).ServeHTTP)
}

// readRoutes are the pages every session may see, within its scope.
func (d *Dashboard) readRoutes(r chi.Router) {
	r.Get("/", d.handle(d.listEndpoints))
	r.Get("/endpoints/{id}", d.handle(d.showEndpoint))
	r.Get("/deliveries/{id}", d.handle(d.showDelivery))
	r.Get("/dead", d.handle(d.listDead))
	r.Get("/events", d.handle(d.listEvents))
	r.Get("/events/{id}", d.handle(d.showEvent))
	r.Get("/lookup", d.handle(d.lookup))
}

// writeRoutes are the changes, and the pages that lead to them, of every
// session that is not read-only, within its scope.
func (d *Dashboard) writeRoutes(r chi.Router) {
	r.Get("/endpoints/{id}/replay", d.handle(d.confirmReplay))
	r.Post("/endpoints/{id}/replay", d.handle(d.replayEndpoint))
	r.Post("/deliveries/{id}/replay", d.handle(d.replayDelivery))
	r.Post("/deliveries/{id}/retry", d.handle(d.retryDelivery))
	r.Get("/endpoints/new", d.handle(d.newEndpoint))
	r.Post("/endpoints", d.handle(d.createEndpoint))
	r.Get("/endpoints/{id}/edit", d.handle(d.editEndpoint))
	r.Post("/endpoints/{id}/edit", d.handle(d.updateEndpoint))
	r.Post("/endpoints/{id}/disable", d.handle(d.setDisabled))
	r.Get("/endpoints/{id}/delete", d.handle(d.confirmDeleteEndpoint))
	r.Post("/endpoints/{id}/delete", d.handle(d.deleteEndpoint))
	r.Post("/endpoints/{id}/secret", d.handle(d.revealSecret))
	r.Get("/endpoints/{id}/secret/rotate", d.handle(d.confirmRotateSecret))
	r.Post("/endpoints/{id}/secret/rotate", d.handle(d.rotateSecret))
	r.Post("/endpoints/{id}/test", d.handle(d.testEndpoint))
	r.Post("/endpoints/{id}/circuit/close", d.handle(d.closeCircuit))
	r.Post("/endpoints/{id}/throttle/lift", d.handle(d.liftThrottle))
	r.Post("/endpoints/{id}/verify", d.handle(d.verifyEndpoint))
}

// tenantRoutes are the pages of a tenant's session only: those every
// role may see (less the guarded pages of authorized), and the changes
// and the pages that lead to them.
func (d *Dashboard) tenantRoutes(r chi.Router) {
	r.Get("/api-keys", d.handle(d.listAPIKeys))
	r.Get("/consumers", d.handle(d.listConsumers))
	r.Get("/consumers/{uid}", d.handle(d.showConsumer))
	r.Get("/event-types", d.handle(d.listEventTypes))
	r.Get("/event-types/{name}", d.handle(d.showEventType))
	r.Get("/audit", d.handle(d.showAuditLog))
	r.Get("/members", d.handle(d.listMembers))
	r.Get("/settings", d.handle(d.showSettings))
	r.Group(func(r chi.Router) {
		r.Use(d.writersOnly)
		r.Post("/api-keys", d.handle(d.createAPIKey))
		r.Get("/api-keys/{id}/revoke", d.handle(d.confirmRevokeAPIKey))
		r.Post("/api-keys/{id}/revoke", d.handle(d.revokeAPIKey))
		r.Post("/consumers", d.handle(d.createConsumer))
		r.Get("/consumers/{uid}/edit", d.handle(d.editConsumer))
		r.Post("/consumers/{uid}/edit", d.handle(d.updateConsumer))
		r.Get("/consumers/{uid}/delete", d.handle(d.confirmDeleteConsumer))
		r.Post("/consumers/{uid}/delete", d.handle(d.deleteConsumer))
		r.Post("/consumers/{uid}/portal", d.handle(d.issuePortalLink))
		r.Get("/consumers/{uid}/portal/revoke", d.handle(d.confirmRevokePortal))
		r.Post("/consumers/{uid}/portal/revoke", d.handle(d.revokePortal))
		r.Post("/event-types", d.handle(d.createEventType))
		r.Get("/event-types/{name}/edit", d.handle(d.editEventType))
		r.Post("/event-types/{name}/edit", d.handle(d.updateEventType))
		r.Get("/event-types/{name}/delete", d.handle(d.confirmDeleteEventType))
		r.Post("/event-types/{name}/delete", d.handle(d.deleteEventType))
		r.Post("/members", d.handle(d.inviteMember))
		r.Post("/members/{id}/edit", d.handle(d.updateMember))
		r.Get("/members/{id}/remove", d.handle(d.confirmRemoveMember))
		r.Post("/members/{id}/remove", d.handle(d.removeMember))
		r.Post("/settings", d.handle(d.setRetention))
	})
}

// Handler returns a router serving only the dashboard, for tests and for
// processes that serve the dashboard alone.
func (d *Dashboard) Handler() http.Handler {
	r := chi.NewRouter()
	d.Mount(r)
	return r
}

// render writes a page with status. It renders into a buffer first, so a
// failing component leaves no half-written page behind.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) error {
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		return fmt.Errorf("render page: %w", err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
	return nil
}

// redirect answers 303 See Other, the answer to a form POST.
func redirect(w http.ResponseWriter, r *http.Request, to string) error {
	http.Redirect(w, r, to, http.StatusSeeOther)
	return nil
}

// contentSecurityPolicy allows the dashboard's own stylesheet and forms and
// nothing else: no scripts, no framing, no third-party anything.
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// securityHeaders sets the headers every dashboard answer carries. Pages
// show tenant data, so they are not cached; static files override that.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// crossOrigin refuses cross-origin form posts by their Sec-Fetch-Site or
// Origin headers, before any token is looked at: defense in depth beside
// the CSRF token, and the only guard the sign-in form (which has no session
// to bind a token to) needs.
func (d *Dashboard) crossOrigin(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(d.handle(func(w http.ResponseWriter, r *http.Request) error {
		return errForbidden("This form was sent from another site.")
	}))
	return cop.Handler(next)
}

// staticMaxAge is how long browsers keep the static files.
const staticMaxAge = "public, max-age=3600"

// favicon answers /favicon.ico, which browsers ask for whatever the page
// says, with the SVG icon.
func favicon(files fs.FS) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		icon, err := fs.ReadFile(files, strings.TrimPrefix(web.FaviconPath, web.StaticPrefix))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Header().Set("Cache-Control", staticMaxAge)
		_, _ = w.Write(icon)
	}
}

// staticHandler serves the embedded static files, without directory
// listings.
func staticHandler(files fs.FS) http.Handler {
	fileServer := http.StripPrefix(web.StaticPrefix, http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", staticMaxAge)
		fileServer.ServeHTTP(w, r)
	})
}

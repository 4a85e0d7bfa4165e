// Package control is every operation a tenant can ask for, written once.
// The doors (the API, the dashboard, the portal) decode a request into a
// Caller and an input, call one method here, and encode or render what it
// returns; they hold no store.
//
// Each method that changes something:
//   - validates its input, answering *sluice.ValidationError;
//   - authorises the caller (Caller.may): its role must allow the action,
//     a portal caller sees only its consumer's objects, and an object
//     outside the caller's scope is sluice.ErrNotFound;
//   - runs its writes in one transaction with their audit entry (change),
//     the action spelled once, in actions.go;
//   - does its own side effects: nudges, operational events, mail jobs,
//     poll invalidation.
//
// A new operation is a method here, a line per door, and its test in this
// package.
package control

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/eventschema"
	"github.com/sluice-dev/sluice/internal/poll"
	"github.com/sluice-dev/sluice/internal/store"
)

// Config is what Control needs.
type Config struct {
	// Store holds the rows; required.
	Store *store.Store
	// Nudger starts and wakes dispatch runs and queues the jobs a change
	// commits with (replay, member mail): the process's one
	// dispatch.Nudger; required.
	Nudger dispatch.TxNudger
	// Poll reads the poll URLs of the process (the API's /poll/{token});
	// control makes it forget an endpoint's kept look-up when the
	// endpoint's secret or existence changes. Nil means a reader of
	// Control's own, woken by Nudger when it can (poll.Waiters).
	Poll *poll.Reader
	// AllowPrivateTargets lets endpoints name loopback and private
	// addresses and plain http URLs (SLUICE_ALLOW_PRIVATE_TARGETS).
	AllowPrivateTargets bool
	// PublicURL is SLUICE_PUBLIC_URL, under which poll URLs are made.
	PublicURL string
	// Logger records what a caller is not told; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MemberMail is how members' links (invitations, password resets)
	// reach them; the zero value, MemberMailSMTP, emails them.
	MemberMail MemberMail
	// Retention and DeadRetention are SLUICE_RETENTION and
	// SLUICE_DEAD_RETENTION: a tenant's own retention is at most these;
	// zero means their defaults (DefaultRetention, DefaultDeadRetention).
	Retention, DeadRetention time.Duration
	// PortalKey is SLUICE_ENCRYPTION_KEY, from which the key that signs
	// portal links is derived (it is never used as is); the links are
	// made under PublicURL. Nil means a random key, so that only this
	// Control accepts the links it signs: for tests.
	PortalKey []byte
}

// Control runs the tenants' operations. It is safe for concurrent use.
type Control struct {
	store  *store.Store
	nudger dispatch.TxNudger
	poll   *poll.Reader
	// forget is poll.Forget, replaced by tests that watch it.
	forget func(endpointID uuid.UUID)
	cfg    Config
	logger *slog.Logger
	now    func() time.Time
	// links signs and checks portal links (portal_links.go).
	links portalLinks
	// schemas are the compiled schemas of the tenants' event types,
	// forgotten when a tenant's catalogue changes (EventSchemas).
	schemas *eventschema.Cache
}

// New returns the Control of cfg.
func New(cfg Config) *Control {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Retention = cmp.Or(cfg.Retention, DefaultRetention)
	cfg.DeadRetention = cmp.Or(cfg.DeadRetention, DefaultDeadRetention)
	reader := cfg.Poll
	if reader == nil {
		waiters, _ := cfg.Nudger.(poll.Waiters)
		reader = poll.New(poll.Config{Store: cfg.Store, Nudger: waiters})
	}
	c := &Control{store: cfg.Store, nudger: cfg.Nudger, poll: reader, forget: reader.Forget,
		cfg: cfg, logger: cfg.Logger, now: cfg.Now}
	c.links = newPortalLinks(cfg.PortalKey, cfg.PublicURL)
	c.schemas = eventschema.NewCache(c.loadSchemas)
	return c
}

// Poll is the reader of the process's poll URLs.
func (c *Control) Poll() *poll.Reader { return c.poll }

// Ping checks that the database answers (GET /readyz).
func (c *Control) Ping(ctx context.Context) error { return c.store.Ping(ctx) }

// TenantAPIRate is a tenant's own API rate, nil when it has none: what
// the doors' rate limits read (apirate.RateSource).
func (c *Control) TenantAPIRate(ctx context.Context, tenant uuid.UUID) (*string, error) {
	return c.store.TenantAPIRate(ctx, tenant)
}

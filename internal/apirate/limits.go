package apirate

import (
	"context"
	"crypto/sha256"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/google/uuid"
)

// The default rates of a session and of failed authentications. A session
// may spend a twentieth of the default tenant rate and a quarter of its
// burst, so neither one portal session handed to a customer nor one
// browser tab on a refresh loop can empty its tenant's bucket alone; a
// person clicking through pages, or opening ten of them at once, never
// meets it. Ten failed authentications a minute are ample for a person
// mistyping a key and for a client with a revoked one, and hold a guesser
// to one database lookup every six seconds per address.
var (
	DefaultSessionRate = MustParse("5/s").WithBurst(50)
	DefaultAuthRate    = MustParse("10/m").WithBurst(10)
)

// Config configures Limits; its zero value is the defaults.
type Config struct {
	// Tenant is the rate of tenants without their own (SLUICE_API_RATE);
	// zero means DefaultRate.
	Tenant Rate
	// Session is each dashboard or portal session's rate; zero means
	// DefaultSessionRate.
	Session Rate
	// Auth is each client address's rate of failed authentications; zero
	// means DefaultAuthRate.
	Auth Rate
	// AuthLookup is each client address's rate of credentials looked up
	// and found wrong once it is past Auth (GateAuth); zero means
	// DefaultAuthLookupRate.
	AuthLookup Rate
	// Rates reads a tenant's own rate; nil means every tenant has Tenant.
	Rates RateSource
	// Buckets keeps the tenants' buckets: Shared, for every process; nil
	// means in this process's memory.
	Buckets Buckets
	// Now is the buckets' clock; nil means time.Now.
	Now func() time.Time
}

// resolve fills in the defaults.
func (c Config) resolve() Config {
	if c.Tenant.IsZero() {
		c.Tenant = MustParse(DefaultRate)
	}
	if c.Session.IsZero() {
		c.Session = DefaultSessionRate
	}
	if c.Auth.IsZero() {
		c.Auth = DefaultAuthRate
	}
	if c.AuthLookup.IsZero() {
		c.AuthLookup = DefaultAuthLookupRate
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Buckets == nil {
		c.Buckets = memoryBuckets{NewLimiter[uuid.UUID](c.Now)}
	}
	return c
}

// Limits are the rate limits of one process's doors. The API, the
// dashboard and the portal share one, so that a tenant's requests draw
// from one bucket whichever door they come through. It is safe for
// concurrent use.
type Limits struct {
	cfg      Config
	rates    rateCache
	sessions *Limiter[[sha256.Size]byte]
	pollURLs *Limiter[uuid.UUID]    // by endpoint
	addrs    *Limiter[netip.Prefix] // failed authentications
	lookups  *Limiter[netip.Prefix] // failed look-ups past addrs (GateAuth)
	known    knownSet               // credentials found valid (Verified)
}

// New returns Limits with every bucket full.
func New(cfg Config) *Limits {
	cfg = cfg.resolve()
	return &Limits{
		cfg:      cfg,
		rates:    rateCache{source: cfg.Rates, now: cfg.Now, entries: map[uuid.UUID]cachedRate{}},
		sessions: NewLimiter[[sha256.Size]byte](cfg.Now),
		pollURLs: NewLimiter[uuid.UUID](cfg.Now),
		addrs:    NewLimiter[netip.Prefix](cfg.Now),
		lookups:  NewLimiter[netip.Prefix](cfg.Now),
	}
}

// tenantRate is the rate of the tenant's bucket: its own, or the default.
func (l *Limits) tenantRate(ctx context.Context, tenant uuid.UUID) Rate {
	return l.rates.get(ctx, tenant, l.cfg.Tenant)
}

// NoteTenantRate keeps the tenant's own rate (tenants.api_rate, nil for
// none) just read with something else, its API key: its bucket uses it for
// a second without reading it again. The API's key cache reads a busy
// key's tenant every half second, so a rate changed reaches the bucket as
// soon as it would without.
func (l *Limits) NoteTenantRate(tenant uuid.UUID, rate *string) {
	l.rates.note(tenant, rate)
}

// TakeTenant takes n tokens from the tenant's bucket if it holds them. It
// fails when the bucket cannot be reached (Shared), with the bucket's last
// known state for the RateLimit headers.
func (l *Limits) TakeTenant(ctx context.Context, tenant uuid.UUID, n int) (Result, error) {
	return l.cfg.Buckets.Take(ctx, tenant, l.tenantRate(ctx, tenant), n)
}

// ChargeTenant takes n tokens from the tenant's bucket whether or not it
// holds them: a charge for work already done, which may leave the bucket
// in debt (Limiter.Charge).
func (l *Limits) ChargeTenant(ctx context.Context, tenant uuid.UUID, n int) Result {
	return l.cfg.Buckets.Charge(ctx, tenant, l.tenantRate(ctx, tenant), n)
}

// TakeSession takes n tokens from the bucket of the session whose secret
// token (a session cookie, a portal link) is given. Buckets are keyed by
// the token's SHA-256, so the limiter holds no secret.
func (l *Limits) TakeSession(token string, n int) Result {
	return l.sessions.Take(sha256.Sum256([]byte(token)), l.cfg.Session, n)
}

// TakePollURL takes n tokens from the bucket of a poll endpoint's URL,
// kept in this process's memory at its tenant's rate. Every read of the
// URL draws from it; one that needs the database draws from the tenant's
// bucket too, so that an idle consumer's re-polls, answered from memory,
// cost its tenant's bucket nothing, and no consumer can empty it alone.
func (l *Limits) TakePollURL(ctx context.Context, tenant, endpoint uuid.UUID, n int) Result {
	return l.pollURLs.Take(endpoint, l.tenantRate(ctx, tenant), n)
}

// CheckAuth reports whether the client address may still fail to
// authenticate, taking nothing. A door that looks a credential up asks
// GateAuth instead; CheckAuth is for one that cannot tell a credential's
// validity without costly work (a password's hash).
func (l *Limits) CheckAuth(addr netip.Prefix) Result {
	return l.addrs.Peek(addr, l.cfg.Auth, 1)
}

// FailAuth charges a failed authentication to the client address (one let
// through by GateOpen or CheckAuth). It may leave the address in debt,
// when failures raced past the check.
func (l *Limits) FailAuth(addr netip.Prefix) Result {
	return l.addrs.Charge(addr, l.cfg.Auth, 1)
}

// ClientPrefix is the client address a request's authentication failures
// are counted against: r.RemoteAddr, the whole IPv4 address or the /64 of
// an IPv6 one (one host's usual allotment). r.RemoteAddr is the
// connection's peer, or the client behind a trusted proxy once
// TrustProxies has read its forwarding headers; ClientPrefix reads none
// itself, as any client can send them.
func ClientPrefix(r *http.Request) netip.Prefix {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}
	}
	addr = addr.Unmap()
	bits := 32
	if addr.Is6() {
		bits = 64
	}
	p, _ := addr.Prefix(bits)
	return p
}

// RetryAfter is res's Retry-After in whole seconds, at least 1.
func RetryAfter(res Result) int { return max(1, Seconds(res.RetryAfter)) }

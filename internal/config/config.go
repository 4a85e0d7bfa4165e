// Package config reads Sluice's configuration from the environment once, at
// start, into a Config that is passed down; nothing else reads the
// environment, but for OpenTelemetry's SDK, which reads its own OTEL_*
// variables (tracing.Config says which are Sluice's).
package config

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/dbwait"
	"github.com/sluice-dev/sluice/internal/secretbox"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/tracing"
)

// Config is every setting of a Sluice process.
type Config struct {
	DatabaseURL string
	// DatabaseSessionURL is where what needs a session of its own goes
	// straight to Postgres (SLUICE_DATABASE_SESSION_URL): LISTEN, the
	// dispatch leases' advisory locks, migrations' lock. Set, DatabaseURL
	// may point at a pooler in transaction mode (docs/pgbouncer.md);
	// empty means everything uses DatabaseURL.
	DatabaseSessionURL string
	Addr               string
	DebugAddr          string
	// HealthAddr is where a process without the API role serves /healthz,
	// /readyz and /metrics (SLUICE_HEALTH_ADDR); empty means nowhere.
	HealthAddr string
	// MetricsAddr is where every process serves /metrics, and then only
	// there (SLUICE_METRICS_ADDR); empty means with the probes, as
	// HealthAddr says.
	MetricsAddr string
	// TrustedProxies are the reverse proxies whose forwarding headers
	// (Forwarded, X-Forwarded-For, X-Forwarded-Proto) are believed
	// (SLUICE_TRUSTED_PROXIES); empty means nobody's.
	TrustedProxies []netip.Prefix
	PublicURL      string
	EncryptionKey  []byte
	// PreviousEncryptionKey is also accepted to open what is sealed, while
	// sluice keys rotate moves everything to EncryptionKey
	// (SLUICE_PREVIOUS_ENCRYPTION_KEY); nil: none.
	PreviousEncryptionKey []byte
	// PayloadEncryption seals new event payloads, stored response bodies
	// and endpoint headers under a data key per tenant
	// (SLUICE_PAYLOAD_ENCRYPTION=on).
	PayloadEncryption   bool
	AllowPrivateTargets bool
	// EgressProxy is the HTTP proxy every delivery attempt leaves through
	// (SLUICE_EGRESS_PROXY, http://host:port); nil: none.
	EgressProxy      *url.URL
	SMTPURL          string
	SMTPFrom         string
	DeliveryTimeout  time.Duration
	RetrySchedule    []time.Duration
	ThrottleSchedule []time.Duration
	CircuitThreshold int
	CircuitProbe     time.Duration
	// DisableAfter is how long an endpoint's attempts may all fail while
	// its circuit stays open before it is disabled (SLUICE_DISABLE_AFTER);
	// negative means never ("off").
	DisableAfter time.Duration
	Retention    time.Duration
	// DeadRetention is how long dead deliveries are kept for replay
	// (SLUICE_DEAD_RETENTION).
	DeadRetention time.Duration
	// AuditRetention is how long audit log entries are kept
	// (SLUICE_AUDIT_RETENTION); whole months are dropped.
	AuditRetention time.Duration
	// SweepInterval is how often (across all workers) due retries are
	// queued and the jobs of dead runs replaced; negative means never
	// (SLUICE_SWEEP_INTERVAL=off, for tests of what holds without it).
	SweepInterval time.Duration
	// APIRate is the API's own rate limit per tenant (SLUICE_API_RATE),
	// for tenants without their own (tenant set-rate).
	APIRate apirate.Rate
	// DrainDelay is how long a stopping API process answers /readyz with
	// 503 before it stops accepting connections (SLUICE_DRAIN_DELAY).
	DrainDelay time.Duration
	// OperatorToken is the operators' credential for River's web UI
	// (SLUICE_OPERATOR_TOKEN); empty means the UI is not served.
	OperatorToken string
	// DBTimeout bounds how long an API request, and /readyz, wait on the
	// database (SLUICE_DB_TIMEOUT); past it the answer is 503 with
	// Retry-After (docs/database.md).
	DBTimeout time.Duration
	// DevMailLog writes members' invitation and password-reset links to
	// the log when SMTPURL is unset (SLUICE_DEV_MAIL_LOG, which `make run`
	// sets): for a developer's machine. Without either, inviting a member
	// or asking for a reset is refused.
	DevMailLog bool
	// MaxPayload is the largest event payload the API takes, in bytes
	// (SLUICE_MAX_PAYLOAD, at most sluice.MaxPayloadCeiling).
	MaxPayload int
	// Tracing is whether and where Sluice exports traces: the OTEL_*
	// variables it reads itself (tracing.ConfigFromEnv says which).
	Tracing tracing.Config
}

// MinOperatorTokenLen is the shortest SLUICE_OPERATOR_TOKEN accepted: it
// guards every job of every tenant, so it must not be guessable.
const MinOperatorTokenLen = 32

// Defaults, as docs/configuration.md lists them.
const (
	DefaultAddr             = "127.0.0.1:8080"
	DefaultRetrySchedule    = "5s,30s,2m,10m,30m,1h,2h,4h,8h"
	DefaultThrottleSchedule = "60s,5m,15m,1h,6h"
	DefaultDeliveryTimeout  = 10 * time.Second
	DefaultCircuitThreshold = 5
	DefaultCircuitProbe     = time.Minute
	DefaultDisableAfter     = 120 * time.Hour
	DefaultRetention        = 336 * time.Hour
	DefaultDeadRetention    = 720 * time.Hour
	DefaultAuditRetention   = 8760 * time.Hour
	DefaultSweepInterval    = time.Second
	DefaultDrainDelay       = 2 * time.Second
	DefaultDBTimeout        = dbwait.DefaultTimeout
	DefaultSMTPFrom         = "Sluice <alerts@sluice.localhost>"
	// minMaxPayload is the lowest SLUICE_MAX_PAYLOAD: a limit below a
	// KiB would refuse the payloads Sluice's own examples show.
	minMaxPayload = 1 << 10
)

// FromEnv reads the configuration from the environment. When needKey is
// false a missing SLUICE_ENCRYPTION_KEY is not an error (commands such as
// migrate never touch secrets).
func FromEnv(needKey bool) (Config, error) {
	return Parse(os.Getenv, needKey)
}

// Parse reads the configuration through getenv, for tests and tools that
// hold settings in a map rather than the environment.
func Parse(getenv func(string) string, needKey bool) (Config, error) {
	p := parser{getenv: getenv}
	c := Config{
		DatabaseURL:         getenv("DATABASE_URL"),
		DatabaseSessionURL:  getenv("SLUICE_DATABASE_SESSION_URL"),
		Addr:                p.str("SLUICE_ADDR", DefaultAddr),
		DebugAddr:           getenv("SLUICE_DEBUG_ADDR"),
		HealthAddr:          getenv("SLUICE_HEALTH_ADDR"),
		MetricsAddr:         getenv("SLUICE_METRICS_ADDR"),
		TrustedProxies:      p.prefixes("SLUICE_TRUSTED_PROXIES"),
		SMTPURL:             getenv("SLUICE_SMTP_URL"),
		SMTPFrom:            p.str("SLUICE_SMTP_FROM", DefaultSMTPFrom),
		AllowPrivateTargets: p.boolean("SLUICE_ALLOW_PRIVATE_TARGETS"),
		EgressProxy:         p.proxy("SLUICE_EGRESS_PROXY"),
		DeliveryTimeout:     p.duration("SLUICE_DELIVERY_TIMEOUT", DefaultDeliveryTimeout),
		RetrySchedule:       p.schedule("SLUICE_RETRY_SCHEDULE", DefaultRetrySchedule),
		ThrottleSchedule:    p.schedule("SLUICE_THROTTLE_SCHEDULE", DefaultThrottleSchedule),
		CircuitThreshold:    p.positiveInt("SLUICE_CIRCUIT_THRESHOLD", DefaultCircuitThreshold),
		CircuitProbe:        p.duration("SLUICE_CIRCUIT_PROBE", DefaultCircuitProbe),
		DisableAfter:        p.durationOrOff("SLUICE_DISABLE_AFTER", DefaultDisableAfter),
		Retention:           p.duration("SLUICE_RETENTION", DefaultRetention),
		DeadRetention:       p.duration("SLUICE_DEAD_RETENTION", DefaultDeadRetention),
		AuditRetention:      p.duration("SLUICE_AUDIT_RETENTION", DefaultAuditRetention),
		SweepInterval:       p.durationOrOff("SLUICE_SWEEP_INTERVAL", DefaultSweepInterval),
		DrainDelay:          p.duration("SLUICE_DRAIN_DELAY", DefaultDrainDelay),
		APIRate:             p.rate("SLUICE_API_RATE", apirate.DefaultRate),
		OperatorToken:       getenv("SLUICE_OPERATOR_TOKEN"),
		DBTimeout:           p.duration("SLUICE_DB_TIMEOUT", DefaultDBTimeout),
		DevMailLog:          p.boolean("SLUICE_DEV_MAIL_LOG"),
		MaxPayload:          p.size("SLUICE_MAX_PAYLOAD", sluice.DefaultMaxPayload, minMaxPayload, sluice.MaxPayloadCeiling),
	}
	if n := len(c.OperatorToken); n > 0 && n < MinOperatorTokenLen {
		p.errs = append(p.errs, fmt.Errorf("SLUICE_OPERATOR_TOKEN: %d characters, at least %d needed (e.g. openssl rand -base64 32)", n, MinOperatorTokenLen))
	}
	var err error
	if c.Tracing, err = tracing.ConfigFromEnv(getenv); err != nil {
		p.errs = append(p.errs, err)
	}
	c.PublicURL = strings.TrimSuffix(p.str("SLUICE_PUBLIC_URL", "http://"+c.Addr), "/")
	if c.DatabaseURL == "" {
		p.errs = append(p.errs, errors.New("DATABASE_URL is required"))
	}
	if raw := getenv("SLUICE_ENCRYPTION_KEY"); raw != "" {
		key, err := secretbox.ParseKey(raw)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("SLUICE_ENCRYPTION_KEY: %w", err))
		}
		c.EncryptionKey = key
	} else if needKey {
		p.errs = append(p.errs, errors.New("SLUICE_ENCRYPTION_KEY is required (32 bytes, base64 or hex)"))
	}
	if raw := getenv("SLUICE_PREVIOUS_ENCRYPTION_KEY"); raw != "" {
		key, err := secretbox.ParseKey(raw)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("SLUICE_PREVIOUS_ENCRYPTION_KEY: %w", err))
		}
		c.PreviousEncryptionKey = key
	}
	switch v := strings.ToLower(strings.TrimSpace(getenv("SLUICE_PAYLOAD_ENCRYPTION"))); v {
	case "", "off", "false", "0":
	case "on", "true", "1":
		c.PayloadEncryption = true
	default:
		p.errs = append(p.errs, fmt.Errorf("SLUICE_PAYLOAD_ENCRYPTION: %q is neither on nor off", v))
	}
	return c, errors.Join(p.errs...)
}

// parser reads typed values and collects every error, so one run reports
// all bad settings at once.
type parser struct {
	getenv func(string) string
	errs   []error
}

func (p *parser) str(name, def string) string {
	if v := p.getenv(name); v != "" {
		return v
	}
	return def
}

func (p *parser) boolean(name string) bool {
	v := p.getenv(name)
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.errs = append(p.errs, fmt.Errorf("%s: %q is not a boolean", name, v))
	}
	return b
}

// proxy reads an HTTP proxy's URL, http://[user:password@]host:port: no
// path, query or other scheme.
func (p *parser) proxy(name string) *url.URL {
	v := p.getenv(name)
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || u.Scheme != "http" || u.Hostname() == "" || u.Port() == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		p.errs = append(p.errs, fmt.Errorf("%s: %q is not an HTTP proxy's URL, http://host:port", name, redact(v)))
		return nil
	}
	u.Path = ""
	return u
}

// prefixes reads a comma-separated list of CIDRs (10.0.0.0/8, fd00::/8);
// a bare address is its own /32 or /128.
func (p *parser) prefixes(name string) []netip.Prefix {
	v := p.getenv(name)
	if strings.TrimSpace(v) == "" {
		return nil
	}
	var out []netip.Prefix
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		pfx, err := netip.ParsePrefix(part)
		if err != nil {
			addr, aerr := netip.ParseAddr(part)
			if aerr != nil || addr.Zone() != "" {
				p.errs = append(p.errs, fmt.Errorf("%s: %q is not a CIDR (e.g. 10.0.0.0/8, 192.0.2.7/32, fd00::/8)", name, part))
				continue
			}
			pfx = netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen())
		}
		if pfx.Addr().Is4In6() {
			// ::ffff:10.0.0.0/104 is 10.0.0.0/8: peers are compared unmapped.
			if pfx.Bits() < 96 {
				p.errs = append(p.errs, fmt.Errorf("%s: %q is not a CIDR of IPv4-mapped addresses (/96 or longer)", name, part))
				continue
			}
			pfx = netip.PrefixFrom(pfx.Addr().Unmap(), pfx.Bits()-96)
		}
		out = append(out, pfx.Masked())
	}
	return out
}

// redact hides the password of a URL that has one, for an error message.
func redact(v string) string {
	if u, err := url.Parse(v); err == nil {
		return u.Redacted()
	}
	return "(unparsable)"
}

func (p *parser) positiveInt(name string, def int) int {
	v := p.getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		p.errs = append(p.errs, fmt.Errorf("%s: %q is not a positive integer", name, v))
		return def
	}
	return n
}

func (p *parser) duration(name string, def time.Duration) time.Duration {
	v := p.getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		p.errs = append(p.errs, fmt.Errorf("%s: %q is not a positive Go duration", name, v))
		return def
	}
	return d
}

// durationOrOff is duration, or -1 for "off".
func (p *parser) durationOrOff(name string, def time.Duration) time.Duration {
	if p.getenv(name) == "off" {
		return -1
	}
	return p.duration(name, def)
}

func (p *parser) rate(name, def string) apirate.Rate {
	r, err := apirate.Parse(p.str(name, def))
	if err != nil {
		p.errs = append(p.errs, fmt.Errorf("%s: %w", name, err))
		return apirate.MustParse(def)
	}
	return r
}

func (p *parser) schedule(name, def string) []time.Duration {
	v := p.str(name, def)
	var out []time.Duration
	for _, part := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil || d <= 0 {
			p.errs = append(p.errs, fmt.Errorf("%s: %q is not a comma-separated list of positive Go durations", name, v))
			return nil
		}
		out = append(out, d)
	}
	return out
}

// sizeUnits are the suffixes a size may carry, longest first.
var sizeUnits = []struct {
	suffix string
	bytes  int64
}{{"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// size reads a byte count, bare ("262144") or with a binary unit ("256KiB",
// "10MiB"), within [lo, hi].
func (p *parser) size(name string, def, lo, hi int) int {
	v := strings.TrimSpace(p.getenv(name))
	if v == "" {
		return def
	}
	num, unit := v, int64(1)
	for _, u := range sizeUnits {
		if s, ok := strings.CutSuffix(v, u.suffix); ok {
			num, unit = strings.TrimSpace(s), u.bytes
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	switch {
	case err != nil || n < 0:
		p.errs = append(p.errs, fmt.Errorf("%s: %q is not a size: a number of bytes, or of KiB or MiB (e.g. 10MiB)", name, v))
		return def
	case n > int64(hi)/unit || n*unit < int64(lo) || n*unit > int64(hi):
		p.errs = append(p.errs, fmt.Errorf("%s: %q is outside %s to %s", name, v, sizeText(lo), sizeText(hi)))
		return def
	}
	return int(n * unit)
}

// sizeText writes a byte count in the largest unit that divides it.
func sizeText(n int) string {
	for _, u := range sizeUnits {
		if int64(n)%u.bytes == 0 {
			return strconv.FormatInt(int64(n)/u.bytes, 10) + u.suffix
		}
	}
	return strconv.Itoa(n) + "B"
}

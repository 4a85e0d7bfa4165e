// Mailer sends Sluice's alert emails (circuit opened / closed) over
// SMTP, configured by SLUICE_SMTP_URL and SLUICE_SMTP_FROM.
//
// smtp://user:pass@host:port upgrades with STARTTLS when the server offers it
// (so a plain local sink works) and smtps://user:pass@host:port uses implicit
// TLS. Credentials are sent with AUTH PLAIN, which go-mail refuses over an
// unencrypted connection unless the host is localhost, 127.0.0.1 or ::1.

package notify

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"strconv"
	"time"
)

// DefaultTimeout bounds one Send (dial, TLS, AUTH and the SMTP dialogue)
// when MailConfig.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// Default ports per scheme.
const (
	DefaultPortSMTP  = 25  // smtp:// (opportunistic STARTTLS)
	DefaultPortSMTPS = 465 // smtps:// (implicit TLS)
)

// MailConfig configures a Mailer.
type MailConfig struct {
	// URL is SLUICE_SMTP_URL: smtp://user:pass@host:port, or smtps:// for
	// implicit TLS. Empty disables mail.
	URL string
	// From is SLUICE_SMTP_FROM, e.g. "Sluice <alerts@sluice.localhost>";
	// required when URL is set.
	From string
	// Timeout bounds one Send; zero means DefaultTimeout.
	Timeout time.Duration
}

// Mailer sends Messages over SMTP. It is safe for concurrent use; every Send
// opens its own connection.
type Mailer struct {
	host      string
	port      int
	implicit  bool // smtps://
	user      string
	pass      string
	auth      bool
	from      string
	timeout   time.Duration
	tlsConfig *tls.Config // tests may replace RootCAs
}

// NewMailer validates cfg and returns a Mailer. An empty cfg.URL yields a disabled
// Mailer (Enabled reports false) and no error. Errors never echo the
// password.
func NewMailer(cfg MailConfig) (*Mailer, error) {
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("mail: negative timeout %s", cfg.Timeout)
	}
	m := &Mailer{timeout: cfg.Timeout}
	if m.timeout == 0 {
		m.timeout = DefaultTimeout
	}
	if cfg.URL == "" {
		return m, nil
	}
	if err := m.parseURL(cfg.URL); err != nil {
		return nil, fmt.Errorf("mail: invalid SLUICE_SMTP_URL: %w", err)
	}
	if cfg.From == "" {
		return nil, errors.New("mail: SLUICE_SMTP_FROM is required when SLUICE_SMTP_URL is set")
	}
	from, err := mail.ParseAddress(cfg.From)
	if err != nil {
		return nil, fmt.Errorf("mail: invalid SLUICE_SMTP_FROM %q: %w", cfg.From, err)
	}
	m.from = from.String()
	m.tlsConfig = &tls.Config{ServerName: m.host, MinVersion: tls.VersionTLS12}
	return m, nil
}

// parseURL fills host, port, implicit and credentials from raw.
func (m *Mailer) parseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return ue.Err // url.Error would repeat the URL, password included
		}
		return fmt.Errorf("parse url: %w", err)
	}
	switch u.Scheme {
	case "smtp":
		m.port = DefaultPortSMTP
	case "smtps":
		m.port, m.implicit = DefaultPortSMTPS, true
	default:
		return fmt.Errorf("unsupported scheme %q (want smtp:// or smtps://)", u.Scheme)
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return errors.New("missing host (want smtp://user:pass@host:port)")
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return errors.New("unexpected path, query or fragment (want smtp://user:pass@host:port)")
	}
	m.host = u.Hostname()
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("invalid port %q", p)
		}
		m.port = n
	}
	if u.User != nil && u.User.Username() != "" {
		m.auth = true
		m.user = u.User.Username()
		m.pass, _ = u.User.Password()
	}
	return nil
}

// Enabled reports whether mail is configured (MailConfig.URL was not empty).
func (m *Mailer) Enabled() bool { return m != nil && m.host != "" }

// Addr returns the server as host:port, or "" when disabled; for logs.
func (m *Mailer) Addr() string {
	if !m.Enabled() {
		return ""
	}
	return net.JoinHostPort(m.host, strconv.Itoa(m.port))
}

package notify

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"

	gomail "github.com/wneessen/go-mail"
)

// ErrDisabled is returned by Send when no SMTP URL is configured.
var ErrDisabled = errors.New("mail: disabled (SLUICE_SMTP_URL is empty)")

// Message is one plain-text email.
type Message struct {
	To      string // one recipient, "addr@example.com" or "Name <addr@example.com>"
	Subject string
	Text    string // plain-text body
	// MessageID is a stable id such as "<alert-<uuid>@sluice>" (angle
	// brackets optional), so a resend of one alert is recognisable as the
	// same message. Empty lets go-mail generate a random one.
	MessageID string
}

// Send delivers msg over a new SMTP connection. The whole exchange is bounded
// by MailConfig.Timeout and by ctx: cancelling ctx aborts it by closing the
// connection. A 4xx answer from the server (e.g. 451) is an error like any
// other; the caller decides whether to retry.
func (m *Mailer) Send(ctx context.Context, msg Message) error {
	if !m.Enabled() {
		return ErrDisabled
	}
	gm, err := m.build(msg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()

	stop := func() bool { return false }
	defer func() { stop() }()
	dial := func(dctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		var err error
		if m.implicit {
			d := &tls.Dialer{Config: m.tlsConfig}
			c, err = d.DialContext(dctx, network, addr) // a *tls.Conn, which go-mail detects as encrypted
		} else {
			var d net.Dialer
			c, err = d.DialContext(dctx, network, addr)
		}
		if err != nil {
			return nil, fmt.Errorf("dial smtp server: %w", err)
		}
		stop = context.AfterFunc(ctx, func() { _ = c.Close() })
		return c, nil
	}

	client, err := gomail.NewClient(m.host, m.clientOptions(dial)...)
	if err != nil {
		return fmt.Errorf("mail: client: %w", err)
	}
	if err := client.DialAndSendWithContext(ctx, gm); err != nil {
		if cerr := context.Cause(ctx); cerr != nil {
			return fmt.Errorf("mail: send to %s via %s: %w: %w", msg.To, m.Addr(), cerr, err)
		}
		return fmt.Errorf("mail: send to %s via %s: %w", msg.To, m.Addr(), err)
	}
	return nil
}

// clientOptions configures a go-mail client for one Send.
func (m *Mailer) clientOptions(dial gomail.DialContextFunc) []gomail.Option {
	opts := []gomail.Option{
		gomail.WithPort(m.port),
		gomail.WithTimeout(m.timeout),
		gomail.WithTLSConfig(m.tlsConfig),
		gomail.WithDialContextFunc(dial),
	}
	if m.implicit {
		opts = append(opts, gomail.WithSSL()) // TLS is done by dial; this only stops a STARTTLS attempt
	} else {
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	}
	if m.auth {
		opts = append(opts,
			gomail.WithSMTPAuth(gomail.SMTPAuthPlain),
			gomail.WithUsername(m.user),
			gomail.WithPassword(m.pass))
	}
	return opts
}

// build turns msg into a go-mail message (quoted-printable UTF-8 text/plain).
func (m *Mailer) build(msg Message) (*gomail.Msg, error) {
	gm := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	if err := gm.From(m.from); err != nil {
		return nil, fmt.Errorf("mail: from: %w", err)
	}
	if strings.TrimSpace(msg.To) == "" {
		return nil, errors.New("mail: message has no recipient")
	}
	if err := gm.To(msg.To); err != nil {
		return nil, fmt.Errorf("mail: invalid recipient %q: %w", msg.To, err)
	}
	gm.Subject(oneLine(msg.Subject))
	if id := strings.Trim(oneLine(msg.MessageID), "<> "); id != "" {
		gm.SetMessageIDWithValue(id) // adds the angle brackets itself
	}
	gm.SetDate()
	gm.SetUserAgent("Sluice")
	gm.SetGenHeader("Auto-Submitted", "auto-generated") // RFC 3834: no auto-replies
	gm.SetGenHeader(gomail.HeaderXAutoResponseSuppress, "All")
	gm.SetBodyString(gomail.TypeTextPlain, msg.Text)
	return gm, nil
}

// oneLine replaces control characters (CR, LF, ...) with spaces so a value
// cannot inject header lines.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

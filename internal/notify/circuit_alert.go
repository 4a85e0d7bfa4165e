package notify

import (
	"fmt"
	"strings"
	"time"
)

// CircuitAlert describes an endpoint's circuit opening or closing again, the
// two emails SPEC "Circuit breaker" sends to a tenant's alert address.
type CircuitAlert struct {
	Opened       bool       // true: circuit opened; false: closed again
	TenantName   string     // optional
	EndpointID   string     // endpoint id
	EndpointURL  string     // endpoint target URL
	LastError    string     // the last failure, e.g. "status 500" or "timeout after 10s"
	Failures     int        // consecutive failures that opened it
	At           time.Time  // when the circuit opened or closed
	NextProbeAt  *time.Time // opened: when the first half-open probe is due
	DashboardURL string     // link to the endpoint's page in the dashboard
}

// alertTimeLayout is how alert times are shown (always UTC).
const alertTimeLayout = "2006-01-02 15:04:05 MST"

// Message renders the alert as a plain-text email to `to` with the given
// Message-ID. The subject is "[Sluice] Circuit opened: <endpoint url>" or
// "[Sluice] Circuit closed: <endpoint url>".
func (a CircuitAlert) Message(to, messageID string) Message {
	state := "closed"
	if a.Opened {
		state = "opened"
	}
	return Message{
		To:        to,
		Subject:   fmt.Sprintf("[Sluice] Circuit %s: %s", state, a.target()),
		Text:      a.text(),
		MessageID: messageID,
	}
}

// target names the endpoint in the subject: its URL, else its id.
func (a CircuitAlert) target() string {
	if a.EndpointURL != "" {
		return a.EndpointURL
	}
	return a.EndpointID
}

func (a CircuitAlert) text() string {
	var b strings.Builder
	if a.Opened {
		fmt.Fprintf(&b, "The circuit of one of your webhook endpoints has opened: Sluice stopped\n"+
			"sending to it after %s.\n\n", failedAttempts(a.Failures))
	} else {
		b.WriteString("The circuit of one of your webhook endpoints has closed again: a probe\n" +
			"delivery succeeded and Sluice is sending to it again.\n\n")
	}

	field := func(name, value string) { writeField(&b, name, value) }
	field("Tenant", a.TenantName)
	field("Endpoint", a.EndpointID)
	field("URL", a.EndpointURL)
	if a.Opened {
		field("Last error", a.LastError)
		if a.Failures > 0 {
			field("Failures", fmt.Sprintf("%d consecutive", a.Failures))
		}
		field("Opened at", formatTime(a.At))
	} else {
		field("Last error", a.LastError) // the outage's last failure, if the caller passes it
		field("Closed at", formatTime(a.At))
	}

	b.WriteString("\nWhat happens now\n")
	if a.Opened {
		b.WriteString("- Sluice makes no delivery attempts to this endpoint while the circuit is open.\n" +
			"- NewMailer deliveries keep queueing; nothing is dropped.\n")
		b.WriteString("- " + a.probeLine() + "\n")
		b.WriteString("- When a probe succeeds the circuit closes, you get another email, and the\n" +
			"  backlog drains at the endpoint's rate limit.\n")
	} else {
		b.WriteString("- The queued backlog now drains at the endpoint's rate limit, not as a burst.\n" +
			"- Nothing was dropped while the circuit was open; no action is needed.\n")
	}

	if a.DashboardURL != "" {
		fmt.Fprintf(&b, "\nEndpoint in the dashboard:\n%s\n", a.DashboardURL)
	}
	b.WriteString("\n-- \nSluice\n")
	return b.String()
}

// probeLine says when the next half-open probe is due (two lines).
func (a CircuitAlert) probeLine() string {
	const backoff = "each failed probe doubles the wait, up to 1 hour."
	if a.NextProbeAt == nil {
		return "Sluice periodically tries one delivery (a probe);\n  " + backoff
	}
	s := "The first probe (one delivery) is due at " + formatTime(*a.NextProbeAt)
	if !a.At.IsZero() && a.NextProbeAt.After(a.At) {
		s += ",\n  " + shortDuration(a.NextProbeAt.Sub(a.At)) + " after opening; " + backoff
	} else {
		s += ";\n  " + backoff
	}
	return s
}

// writeField writes one "Name:  value" line of an alert, none for an
// empty value.
func writeField(b *strings.Builder, name, value string) {
	if value != "" {
		fmt.Fprintf(b, "%-13s %s\n", name+":", value)
	}
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(alertTimeLayout)
}

// shortDuration renders d rounded to seconds without zero tails: "1m", "1h30m", "45s".
func shortDuration(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// failedAttempts renders "5 consecutive failed attempts".
func failedAttempts(n int) string {
	switch {
	case n <= 0:
		return "repeated failed attempts"
	case n == 1:
		return "1 failed attempt"
	default:
		return fmt.Sprintf("%d consecutive failed attempts", n)
	}
}

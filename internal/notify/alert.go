package notify

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// Alert is the email that tells an endpoint's owner of an operational
// event, rendered from the event's type and payload: one template per
// type (templates), so the email says what the event says.
type Alert struct {
	Event        sluice.OpEvent
	TenantName   string    // optional
	At           time.Time // when it happened
	DashboardURL string    // the endpoint's page, optional
}

// alertTemplate is one event type's email: its subject, the paragraph
// that says what happened, the lines of its own fields and what happens
// now. Each reads the payload and when it happened.
type alertTemplate struct {
	subject string
	intro   func(p sluice.OpPayload) string
	fields  func(p sluice.OpPayload, at time.Time) [][2]string
	next    func(p sluice.OpPayload, at time.Time) string
}

// templates are the emails, by operational event type: those for which
// sluice.OpEvent.EmailsOwner holds.
var templates = map[string]alertTemplate{
	sluice.OpEndpointCircuitOpened: {
		subject: "Circuit opened",
		intro: func(p sluice.OpPayload) string {
			return "The circuit of one of your webhook endpoints has opened: Sluice stopped\n" +
				"sending to it after " + failedAttempts(p.Failures) + "."
		},
		fields: func(p sluice.OpPayload, at time.Time) [][2]string {
			f := [][2]string{{"Last error", p.LastError}}
			if p.Failures > 0 {
				f = append(f, [2]string{"Failures", fmt.Sprintf("%d consecutive", p.Failures)})
			}
			return append(f, [2]string{"Opened at", formatTime(at)})
		},
		next: func(p sluice.OpPayload, at time.Time) string {
			return "- Sluice makes no delivery attempts to this endpoint while the circuit is open.\n" +
				"- New deliveries keep queueing; nothing is dropped.\n" +
				"- " + probeLine(at, p.NextProbeAt) + "\n" +
				"- When a probe succeeds the circuit closes, you get another email, and the\n" +
				"  backlog drains at the endpoint's rate limit.\n"
		},
	},
	sluice.OpEndpointCircuitClosed: {
		subject: "Circuit closed",
		intro: func(p sluice.OpPayload) string {
			if p.Reason == sluice.ReasonManual {
				return "The circuit of one of your webhook endpoints was closed by hand: Sluice is\nsending to it again."
			}
			return "The circuit of one of your webhook endpoints has closed again: a probe\n" +
				"delivery succeeded and Sluice is sending to it again."
		},
		fields: func(p sluice.OpPayload, at time.Time) [][2]string {
			return [][2]string{{"Reason", p.Reason}, {"Closed at", formatTime(at)}}
		},
		next: func(sluice.OpPayload, time.Time) string {
			return "- The queued backlog now drains at the endpoint's rate limit, not as a burst.\n" +
				"- Nothing was dropped while the circuit was open; no action is needed.\n"
		},
	},
	sluice.OpEndpointDisabled: {
		subject: "Endpoint disabled",
		intro: func(p sluice.OpPayload) string {
			if p.Reason == sluice.DisabledGone {
				return "Sluice disabled one of your webhook endpoints: its receiver answered\n410 Gone, which asks senders to stop."
			}
			return "Sluice disabled one of your webhook endpoints: every attempt to deliver to it\n" +
				"has failed for a long time while its circuit stayed open."
		},
		fields: func(p sluice.OpPayload, at time.Time) [][2]string {
			return [][2]string{{"Reason", p.Reason}, {"Last error", p.LastError}, {"Disabled at", formatTime(at)}}
		},
		next: func(sluice.OpPayload, time.Time) string {
			return "- Sluice makes no delivery attempts to this endpoint, and new events no\n" +
				"  longer queue for it.\n" +
				"- Deliveries already queued are kept. Enable the endpoint again\n" +
				"  (PATCH {\"disabled\": false}) and they drain at its rate limit.\n"
		},
	},
	sluice.OpEndpointBacklog: {
		subject: "Endpoint backlog",
		intro: func(p sluice.OpPayload) string {
			if p.Reason == sluice.ReasonOldest {
				return "Deliveries are piling up for one of your webhook endpoints: its oldest\n" +
					"due delivery has waited longer than its backlog alert allows."
			}
			return "Deliveries are piling up for one of your webhook endpoints: as many are\n" +
				"queued as its backlog alert allows."
		},
		fields: func(p sluice.OpPayload, at time.Time) [][2]string {
			var f [][2]string
			if p.Queued != nil {
				f = append(f, [2]string{"Queued", strconv.FormatInt(*p.Queued, 10)})
			}
			if p.OldestDueSeconds != nil {
				f = append(f, [2]string{"Longest wait", shortDuration(time.Duration(*p.OldestDueSeconds) * time.Second)})
			}
			if t := p.BacklogAlert; t != nil {
				f = append(f, [2]string{"Alert at", thresholds(*t)})
			}
			return append(f, [2]string{"At", formatTime(at)})
		},
		next: func(sluice.OpPayload, time.Time) string {
			return "- Sluice keeps every delivery and goes on sending at the endpoint's rate\n" +
				"  limit. A backlog grows when the receiver is slow, failing, throttling\n" +
				"  (429) or its circuit is open; the endpoint's page shows which.\n" +
				"- You get no other backlog alert for this endpoint until its backlog\n" +
				"  has fallen below half of the thresholds.\n"
		},
	},
	sluice.OpCertificateExpiring: {
		subject: "Client certificate expiring",
		intro: func(p sluice.OpPayload) string {
			return "The client certificate one of your webhook endpoints presents (its tls\n" +
				"option) expires soon. A receiver that requires it refuses deliveries once\n" +
				"it has expired."
		},
		fields: func(p sluice.OpPayload, at time.Time) [][2]string {
			f := [][2]string{{"Certificate", p.CertificateSubject}}
			if p.NotAfter != nil {
				f = append(f, [2]string{"Expires", formatTime(*p.NotAfter)})
			}
			return append(f, [2]string{"Checked at", formatTime(at)})
		},
		next: func(sluice.OpPayload, time.Time) string {
			return "- Sluice goes on presenting this certificate until you replace it.\n" +
				"- Replace it with a renewed certificate and its key (the endpoint's\n" +
				"  tls option, in the API or the dashboard's endpoint form).\n" +
				"- This is the only email about this certificate; a new one is watched\n" +
				"  afresh.\n"
		},
	},
}

// Message renders the alert as a plain-text email to `to` with the given
// Message-ID. The subject is "[Sluice] <what happened>: <endpoint url>".
func (a Alert) Message(to, messageID string) Message {
	t, ok := templates[a.Event.Type]
	if !ok { // an event without an email of its own: say what it is
		t = alertTemplate{
			subject: a.Event.Type,
			intro: func(sluice.OpPayload) string {
				return "Sluice reports " + a.Event.Type + " about one of your webhook endpoints."
			},
			fields: func(p sluice.OpPayload, at time.Time) [][2]string {
				return [][2]string{{"Reason", p.Reason}, {"At", formatTime(at)}}
			},
			next: func(sluice.OpPayload, time.Time) string { return "" },
		}
	}
	p := a.Event.Payload
	target := p.URL
	if target == "" {
		target = p.EndpointID.String()
	}
	var b strings.Builder
	b.WriteString(t.intro(p) + "\n\n")
	writeField(&b, "Tenant", a.TenantName)
	writeField(&b, "Endpoint", p.EndpointID.String())
	writeField(&b, "URL", p.URL)
	if p.Consumer != nil {
		writeField(&b, "Consumer", *p.Consumer)
	}
	for _, f := range t.fields(p, a.At) {
		writeField(&b, f[0], f[1])
	}
	if next := t.next(p, a.At); next != "" {
		b.WriteString("\nWhat happens now\n" + next)
	}
	if a.DashboardURL != "" {
		fmt.Fprintf(&b, "\nEndpoint in the dashboard:\n%s\n", a.DashboardURL)
	}
	b.WriteString("\n-- \nSluice\n")
	return Message{To: to, Subject: "[Sluice] " + t.subject + ": " + target, Text: b.String(), MessageID: messageID}
}

// alertTimeLayout is how alert times are shown (always UTC).
const alertTimeLayout = "2006-01-02 15:04:05 MST"

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

// probeLine says when the next half-open probe is due (two lines).
func probeLine(openedAt time.Time, next *time.Time) string {
	const backoff = "each failed probe doubles the wait, up to 1 hour."
	if next == nil {
		return "Sluice periodically tries one delivery (a probe);\n  " + backoff
	}
	s := "The first probe (one delivery) is due at " + formatTime(*next)
	if !openedAt.IsZero() && next.After(openedAt) {
		return s + ",\n  " + shortDuration(next.Sub(openedAt)) + " after opening; " + backoff
	}
	return s + ";\n  " + backoff
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

// thresholds names a backlog alert's thresholds: "1000 queued or 10m waited".
func thresholds(t sluice.BacklogAlert) string {
	var parts []string
	if t.Queued > 0 {
		parts = append(parts, fmt.Sprintf("%d queued", t.Queued))
	}
	if t.OldestSeconds > 0 {
		parts = append(parts, shortDuration(time.Duration(t.OldestSeconds)*time.Second)+" waited")
	}
	return strings.Join(parts, " or ")
}

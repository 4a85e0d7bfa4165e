package notify

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// DisabledAlert describes an endpoint Sluice disabled: its receiver
// answered 410 Gone, or its attempts all failed for SLUICE_DISABLE_AFTER
// while its circuit stayed open (SPEC "Disabling").
type DisabledAlert struct {
	Reason       string // sluice.DisabledGone or sluice.DisabledFailing
	TenantName   string // optional
	EndpointID   string
	EndpointURL  string
	LastError    string
	At           time.Time
	DashboardURL string
}

// Message renders the alert as a plain-text email to `to`, with the
// subject "[Sluice] Endpoint disabled: <endpoint url>".
func (a DisabledAlert) Message(to, messageID string) Message {
	target := a.EndpointURL
	if target == "" {
		target = a.EndpointID
	}
	return Message{
		To:        to,
		Subject:   "[Sluice] Endpoint disabled: " + target,
		Text:      a.text(),
		MessageID: messageID,
	}
}

func (a DisabledAlert) text() string {
	var b strings.Builder
	b.WriteString("Sluice disabled one of your webhook endpoints: ")
	switch a.Reason {
	case sluice.DisabledGone:
		b.WriteString("its receiver answered\n410 Gone, which asks senders to stop.\n\n")
	default:
		b.WriteString("every attempt to deliver to it\nhas failed for a long time while its circuit stayed open.\n\n")
	}
	field := func(name, value string) { writeField(&b, name, value) }
	field("Tenant", a.TenantName)
	field("Endpoint", a.EndpointID)
	field("URL", a.EndpointURL)
	field("Reason", a.Reason)
	field("Last error", a.LastError)
	field("Disabled at", formatTime(a.At))
	b.WriteString("\nWhat happens now\n" +
		"- Sluice makes no delivery attempts to this endpoint, and new events no\n" +
		"  longer queue for it.\n" +
		"- Deliveries already queued are kept. Enable the endpoint again\n" +
		"  (PATCH {\"disabled\": false}) and they drain at its rate limit.\n")
	if a.DashboardURL != "" {
		fmt.Fprintf(&b, "\nEndpoint in the dashboard:\n%s\n", a.DashboardURL)
	}
	b.WriteString("\n-- \nSluice\n")
	return b.String()
}

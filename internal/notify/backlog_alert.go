package notify

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// BacklogAlert describes an endpoint whose backlog reached its
// backlog_alert (SPEC "Backlog alerts"), from the payload of the
// sluice.endpoint.backlog event it goes out with.
type BacklogAlert struct {
	Payload      sluice.OpPayload
	TenantName   string // optional
	At           time.Time
	DashboardURL string
}

// Message renders the alert as a plain-text email to `to`, with the
// subject "[Sluice] Endpoint backlog: <endpoint url>".
func (a BacklogAlert) Message(to, messageID string) Message {
	target := a.Payload.URL
	if target == "" {
		target = a.Payload.EndpointID.String()
	}
	return Message{To: to, Subject: "[Sluice] Endpoint backlog: " + target, Text: a.text(), MessageID: messageID}
}

func (a BacklogAlert) text() string {
	var b strings.Builder
	p := a.Payload
	b.WriteString("Deliveries are piling up for one of your webhook endpoints: ")
	if p.Reason == sluice.ReasonOldest {
		b.WriteString("its oldest\ndue delivery has waited longer than its backlog alert allows.\n\n")
	} else {
		b.WriteString("as many are\nqueued as its backlog alert allows.\n\n")
	}
	field := func(name, value string) { writeField(&b, name, value) }
	field("Tenant", a.TenantName)
	field("Endpoint", p.EndpointID.String())
	field("URL", p.URL)
	if p.Consumer != nil {
		field("Consumer", *p.Consumer)
	}
	if p.Queued != nil {
		field("Queued", strconv.FormatInt(*p.Queued, 10))
	}
	if p.OldestDueSeconds != nil {
		field("Oldest waited", (time.Duration(*p.OldestDueSeconds) * time.Second).String())
	}
	if t := p.BacklogAlert; t != nil {
		field("Alert at", thresholds(*t))
	}
	field("At", formatTime(a.At))
	b.WriteString("\nWhat happens now\n" +
		"- Sluice keeps every delivery and goes on sending at the endpoint's rate\n" +
		"  limit. A backlog grows when the receiver is slow, failing, throttling\n" +
		"  (429) or its circuit is open; the endpoint's page shows which.\n" +
		"- You get no other backlog alert for this endpoint until its backlog\n" +
		"  has fallen below half of the thresholds.\n")
	if a.DashboardURL != "" {
		fmt.Fprintf(&b, "\nEndpoint in the dashboard:\n%s\n", a.DashboardURL)
	}
	b.WriteString("\n-- \nSluice\n")
	return b.String()
}

// thresholds names an alert's thresholds: "1000 queued or 5m0s waited".
func thresholds(t sluice.BacklogAlert) string {
	var parts []string
	if t.Queued > 0 {
		parts = append(parts, fmt.Sprintf("%d queued", t.Queued))
	}
	if t.OldestSeconds > 0 {
		parts = append(parts, (time.Duration(t.OldestSeconds)*time.Second).String()+" waited")
	}
	return strings.Join(parts, " or ")
}

package notify_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/notify"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// TestAlertMessages: each operational event that emails the owner renders
// its subject and the lines that say what happened and what happens now,
// from the event's payload alone.
func TestAlertMessages(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	ep := sluice.OpEndpoint{ID: uuid.MustParse("0193a5c8-7d3e-7c6a-9d7e-2f5b8a1c4e91"), URL: "https://example.com/hook", Consumer: new("acme")}
	event := func(typ, reason string, fill func(*sluice.OpPayload)) sluice.OpEvent {
		ev := ep.Event(typ, reason)
		if fill != nil {
			fill(&ev.Payload)
		}
		return ev
	}
	next := at.Add(90 * time.Minute)
	for name, tc := range map[string]struct {
		ev      sluice.OpEvent
		subject string
		want    []string
	}{
		"circuit opened": {
			ev: event(sluice.OpEndpointCircuitOpened, sluice.ReasonFailures, func(p *sluice.OpPayload) {
				p.LastError, p.Failures, p.NextProbeAt = "status 500", 5, &next
			}),
			subject: "Circuit opened",
			want: []string{
				"has opened", "after 5 consecutive failed attempts", "Last error:   status 500\n",
				"Failures:     5 consecutive\n", "Opened at:    2026-11-22 10:00:00 UTC\n", "nothing is dropped",
				"due at 2026-11-22 11:30:00 UTC,\n  1h30m after opening", "doubles the wait, up to 1 hour",
			},
		},
		"circuit opened, no count or probe": {
			ev:      event(sluice.OpEndpointCircuitOpened, sluice.ReasonFailures, nil),
			subject: "Circuit opened",
			want:    []string{"after repeated failed attempts", "periodically tries one delivery"},
		},
		"circuit closed by a probe": {
			ev:      event(sluice.OpEndpointCircuitClosed, sluice.ReasonProbeSucceeded, nil),
			subject: "Circuit closed",
			want:    []string{"a probe\ndelivery succeeded", "Closed at:    2026-11-22 10:00:00 UTC\n", "drains at the endpoint's rate limit"},
		},
		"circuit closed by hand": {
			ev:      event(sluice.OpEndpointCircuitClosed, sluice.ReasonManual, nil),
			subject: "Circuit closed",
			want:    []string{"closed by hand", "Reason:       manual\n"},
		},
		"disabled: gone": {
			ev:      event(sluice.OpEndpointDisabled, sluice.DisabledGone, func(p *sluice.OpPayload) { p.LastError = "status 410" }),
			subject: "Endpoint disabled",
			want: []string{
				"410 Gone", "Reason:       gone\n", "Last error:   status 410\n", "Disabled at:  2026-11-22 10:00:00 UTC\n",
				"Deliveries already queued are kept", `PATCH {"disabled": false}`,
			},
		},
		"disabled: failing": {
			ev:      event(sluice.OpEndpointDisabled, sluice.DisabledFailing, nil),
			subject: "Endpoint disabled",
			want:    []string{"has failed for a long time", "Reason:       failing\n"},
		},
		"backlog": {
			ev: event(sluice.OpEndpointBacklog, sluice.ReasonQueued, func(p *sluice.OpPayload) {
				p.Queued, p.OldestDueSeconds, p.BacklogAlert = new(int64(1200)), new(int64(95)), &sluice.BacklogAlert{Queued: 1000, OldestSeconds: 600}
			}),
			subject: "Endpoint backlog",
			want: []string{
				"as many are\nqueued", "Queued:       1200\n", "Longest wait: 1m35s\n",
				"Alert at:     1000 queued or 10m waited\n", "below half of the thresholds",
			},
		},
		"certificate expiring": {
			ev: event(sluice.OpCertificateExpiring, sluice.ReasonExpiring, func(p *sluice.OpPayload) {
				p.CertificateSubject, p.NotAfter = "CN=sluice-client,O=Acme", new(at.Add(13*24*time.Hour))
			}),
			subject: "Client certificate expiring",
			want: []string{
				"expires soon", "Certificate:  CN=sluice-client,O=Acme\n", "Expires:      2026-12-05 10:00:00 UTC\n",
				"renewed certificate and its key", "only email about this certificate",
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.True(t, tc.ev.EmailsOwner())
			msg := notify.Alert{Event: tc.ev, At: at, DashboardURL: "https://sluice.example/endpoints/x"}.Message("ops@acme.test", "<alert-7@sluice>")
			require.Equal(t, "ops@acme.test", msg.To)
			require.Equal(t, "<alert-7@sluice>", msg.MessageID)
			require.Equal(t, "[Sluice] "+tc.subject+": https://example.com/hook", msg.Subject)
			common := []string{
				"Endpoint:     " + ep.ID.String() + "\n", "URL:          https://example.com/hook\n", "Consumer:     acme\n",
				"Endpoint in the dashboard:\nhttps://sluice.example/endpoints/x\n",
			}
			for _, want := range append(common, tc.want...) {
				require.Contains(t, msg.Text, want)
			}
			require.NotContains(t, msg.Text, "Tenant:", "no tenant name given")
		})
	}
}

// TestOnlyTheOwnersBusinessIsEmailed: what the owner did, and each dead
// delivery, are events without an email.
func TestOnlyTheOwnersBusinessIsEmailed(t *testing.T) {
	t.Parallel()
	ep := sluice.OpEndpoint{URL: "https://example.com/hook"}
	for _, ev := range []sluice.OpEvent{
		ep.Event(sluice.OpEndpointDisabled, sluice.DisabledManual),
		ep.Event(sluice.OpEndpointEnabled, sluice.ReasonManual),
		ep.Event(sluice.OpDeliveryDead, sluice.ReasonAttemptsSpent),
	} {
		require.False(t, ev.EmailsOwner(), ev.Type+" "+ev.Payload.Reason)
	}
}

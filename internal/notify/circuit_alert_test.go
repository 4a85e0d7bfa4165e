package notify_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/notify"
)

func TestCircuitOpenedMessage(t *testing.T) {
	t.Parallel()
	a := openedAlert()
	msg := a.Message("ops@acme.test", "<alert-7@sluice>")
	require.Equal(t, "ops@acme.test", msg.To)
	require.Equal(t, "<alert-7@sluice>", msg.MessageID)
	require.Equal(t, "[Sluice] Circuit opened: "+a.EndpointURL, msg.Subject)
	for _, want := range []string{
		"has opened", "after 5 consecutive failed attempts",
		"Endpoint:     ep_01JD3\n",
		"URL:          " + a.EndpointURL + "\n",
		"Last error:   status 500\n",
		"Failures:     5 consecutive\n",
		"Opened at:    2026-11-22 10:00:00 UTC\n",
		"nothing is dropped",
		"due at 2026-11-22 10:01:00 UTC,\n  1m after opening",
		"doubles the wait, up to 1 hour",
		"drains at the endpoint's rate limit",
		"Endpoint in the dashboard:\n" + a.DashboardURL + "\n",
	} {
		require.Contains(t, msg.Text, want)
	}
}

func TestCircuitClosedMessage(t *testing.T) {
	t.Parallel()
	a := notify.CircuitAlert{
		EndpointID:   "ep_9",
		EndpointURL:  "https://example.com/hook",
		LastError:    "timeout after 10s",
		At:           time.Date(2026, 11, 22, 11, 30, 0, 0, time.FixedZone("CET", 3600)),
		DashboardURL: "https://sluice.example/dashboard/endpoints/ep_9",
	}
	msg := a.Message("ops@acme.test", "<alert-8@sluice>")
	require.Equal(t, "[Sluice] Circuit closed: https://example.com/hook", msg.Subject)
	for _, want := range []string{
		"has closed", "Endpoint:     ep_9\n", "URL:          https://example.com/hook\n",
		"Last error:   timeout after 10s\n",
		"Closed at:    2026-11-22 10:30:00 UTC\n",
		"backlog now drains at the endpoint's rate limit",
		a.DashboardURL,
	} {
		require.Contains(t, msg.Text, want)
	}
	require.NotContains(t, msg.Text, "Tenant:")
	require.NotContains(t, msg.Text, "probe (one delivery)")
}

func TestCircuitAlertFallbacks(t *testing.T) {
	t.Parallel()
	msg := notify.CircuitAlert{Opened: true, EndpointID: "ep_x", At: time.Now()}.Message("a@b.c", "")
	require.Equal(t, "[Sluice] Circuit opened: ep_x", msg.Subject)
	require.Contains(t, msg.Text, "after repeated failed attempts")
	require.Contains(t, msg.Text, "periodically tries one delivery")
	require.NotContains(t, msg.Text, "dashboard")
}

func TestCircuitAlertProbeInterval(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		time.Minute: "1m after", 2 * time.Hour: "2h after", 90 * time.Minute: "1h30m after", 1500 * time.Millisecond: "2s after",
	} {
		next := at.Add(d)
		msg := notify.CircuitAlert{Opened: true, EndpointID: "e", At: at, NextProbeAt: &next}.Message("a@b.c", "")
		require.Contains(t, msg.Text, want)
	}
}

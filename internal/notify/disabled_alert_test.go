package notify_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/notify"
	"github.com/sluice-dev/sluice/internal/sluice"
)

func TestDisabledMessage(t *testing.T) {
	t.Parallel()
	for reason, why := range map[string]string{
		sluice.DisabledGone:    "410 Gone",
		sluice.DisabledFailing: "has failed for a long time",
	} {
		a := notify.DisabledAlert{
			Reason: reason, EndpointID: "ep_9", EndpointURL: "https://example.com/hook", LastError: "status 410",
			At: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), DashboardURL: "https://sluice.example/endpoints/ep_9",
		}
		msg := a.Message("ops@acme.test", "<alert-9@sluice>")
		require.Equal(t, "[Sluice] Endpoint disabled: https://example.com/hook", msg.Subject)
		for _, want := range []string{
			why, "Reason:       " + reason + "\n", "Last error:   status 410\n",
			"Disabled at:  2026-11-22 10:00:00 UTC\n", "Deliveries already queued are kept",
			`PATCH {"disabled": false}`, "Endpoint in the dashboard:\nhttps://sluice.example/endpoints/ep_9\n",
		} {
			require.Contains(t, msg.Text, want, reason)
		}
	}
}

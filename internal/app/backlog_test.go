package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/receiver"
	"github.com/sluice-dev/sluice/internal/testkit/smtpsink"
)

// backlogEvents are the sluice.endpoint.backlog events rcv received about
// endpoint id, decoded.
func backlogEvents(t *testing.T, rcv *receiver.Receiver, id string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range rcv.Requests() {
		var ev struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &ev))
		if ev.Type == "sluice.endpoint.backlog" && ev.Data["endpoint_id"] == id {
			require.True(t, r.Verified)
			out = append(out, ev.Data)
		}
	}
	return out
}

// backlogChecked waits for two backlog checks of the sweep to begin after
// it is called: the second read the backlog as it was when it was called,
// so whatever an alert could do, it has done.
func (h *harness) backlogChecked() {
	h.t.Helper()
	lastCheck := func() time.Time {
		var at time.Time
		require.NoError(h.t, h.proc.Pool.QueryRow(context.Background(),
			`SELECT swept_at FROM sweeps WHERE name = 'backlog'`).Scan(&at))
		return at
	}
	for range 2 {
		before := lastCheck()
		eventually(h.t, 10*time.Second, func() bool { return lastCheck().After(before) }, "a backlog check")
	}
}

// TestBacklogAlertOnceUntilItDrains: an endpoint whose queued deliveries
// reach backlog_alert.queued mails its owner and emits
// sluice.endpoint.backlog once; more events add no alert; once the backlog
// has drained below half it may alert again, and does.
func TestBacklogAlertOnceUntilItDrains(t *testing.T) {
	sink := smtpsink.Start(t)
	h := start(t, map[string]string{"SLUICE_SMTP_URL": sink.URL(), "SLUICE_SWEEP_INTERVAL": "100ms"})
	slow, ops := receiver.New(t), receiver.New(t)
	slowRate := map[string]any{"per_minute": 1}
	id, _ := h.endpoint(slow, []string{"order.*"}, map[string]any{"rate_limit": slowRate, "backlog_alert": map[string]any{"queued": 5}})
	h.endpoint(ops, []string{"sluice.*"}, nil)
	var ep struct {
		BacklogAlert map[string]any `json:"backlog_alert"`
	}
	h.call(http.MethodGet, "/v1/endpoints/"+id, nil, http.StatusOK, &ep)
	require.Equal(t, map[string]any{"queued": 5.0}, ep.BacklogAlert)

	h.postBatch("order.created", 7) // one goes at once, six wait
	eventually(t, 10*time.Second, func() bool { return len(backlogEvents(t, ops, id)) == 1 }, "the backlog alert arrives")
	ev := backlogEvents(t, ops, id)[0]
	require.Equal(t, "queued", ev["reason"])
	require.GreaterOrEqual(t, ev["queued"], 5.0)
	require.Equal(t, map[string]any{"queued": 5.0}, ev["backlog_alert"])
	mail := sink.Wait(t, 1, 10*time.Second)[0]
	require.Contains(t, mail.Subject, "backlog")
	require.Contains(t, mail.Text, slow.URL())

	h.postBatch("order.created", 3)
	h.backlogChecked()
	require.Len(t, backlogEvents(t, ops, id), 1, "one alert until the backlog falls below half")

	// Drain at a fast rate, not with none: a rate-limited endpoint's every
	// claim reads its row, so the slow rate restored below holds from the
	// next claim (without one a run may go on unlocked for a second).
	h.call(http.MethodPatch, "/v1/endpoints/"+id, map[string]any{"rate_limit": map[string]any{"per_second": 100}}, http.StatusOK, nil)
	eventually(t, 10*time.Second, func() bool { return slow.Count() == 10 }, "the backlog drains")
	// The receiver has every request before each is recorded delivered:
	// wait for the check that saw the drained backlog to rearm the alert.
	eventually(t, 10*time.Second, func() bool {
		var rearmed bool
		require.NoError(t, h.proc.Pool.QueryRow(context.Background(),
			`SELECT backlog_alerted_at IS NULL FROM endpoints WHERE id = $1`, id).Scan(&rearmed))
		return rearmed
	}, "the drained backlog rearms the alert")
	h.call(http.MethodPatch, "/v1/endpoints/"+id, map[string]any{"rate_limit": slowRate}, http.StatusOK, nil)
	h.postBatch("order.created", 7)
	eventually(t, 10*time.Second, func() bool { return len(backlogEvents(t, ops, id)) == 2 }, "drained below half, it alerts again")
	require.Len(t, sink.Wait(t, 2, 10*time.Second), 2)
}

// TestBacklogAlertOnOldestDue: a delivery due for longer than
// backlog_alert.oldest_seconds alerts with reason "oldest".
func TestBacklogAlertOnOldestDue(t *testing.T) {
	h := start(t, map[string]string{"SLUICE_SWEEP_INTERVAL": "100ms"})
	slow, ops := receiver.New(t), receiver.New(t)
	id, _ := h.endpoint(slow, []string{"order.*"}, map[string]any{
		"rate_limit": map[string]any{"per_minute": 1}, "backlog_alert": map[string]any{"oldest_seconds": 1},
	})
	h.endpoint(ops, []string{"sluice.*"}, nil)
	h.postBatch("order.created", 2) // the second waits a minute
	eventually(t, 10*time.Second, func() bool { return len(backlogEvents(t, ops, id)) == 1 }, "the backlog alert arrives")
	ev := backlogEvents(t, ops, id)[0]
	require.Equal(t, "oldest", ev["reason"])
	require.GreaterOrEqual(t, ev["oldest_due_seconds"], 1.0)
	require.Equal(t, 1.0, ev["queued"])
}

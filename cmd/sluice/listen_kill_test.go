package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// TestListenKilledRepeatsNothingAcknowledged runs the sluice binary's
// `listen` over 300 deliveries (three pages of 100) and kills it with
// SIGKILL half way, while the local server holds the 151st delivery
// unanswered, so that the 150 before it are acknowledged and the 151st
// is not. Restarted with the same cursor file, it forwards the 151st
// again (never acknowledged: at-least-once) and the rest once each, in
// order, nothing acknowledged again, nothing skipped; every body is the
// one the poll URL holds, byte for byte, and its signature verifies.
func TestListenKilledRepeatsNothingAcknowledged(t *testing.T) {
	const events, half = 300, 150
	bin := sluiceBinary(t)
	b := setupListen(t)
	pollURL, secret := b.pollEndpoint()
	var posted []string
	for first := 0; first < events; first += 100 {
		payloads := make([]string, 100)
		for i := range payloads {
			n := first + i
			// Spacing, escapes and non-ASCII kept as posted; sizes vary.
			payloads[i] = fmt.Sprintf(`{ "n" : %d, "s": "<\u00e9%s>", "list": [1, 2.50, null] }`, n, strings.Repeat("x", n*7%500))
		}
		posted = append(posted, b.postBatch(payloads)...)
	}
	order, bodies := b.polled(pollURL, events)
	require.Equal(t, posted, order, "the poll URL answers the events in the order posted")

	local := receiver.New(t)
	require.NoError(t, local.SetSecret(secret))
	local.AnswerFunc(func(n int) receiver.Behavior {
		if n == half+1 {
			return receiver.Behavior{Delay: 10 * time.Minute} // ends when the killed listener's connection does
		}
		return receiver.Behavior{Status: http.StatusNoContent}
	})
	args := []string{"--poll-url", pollURL, "--forward-to", local.URL(), "--secret", secret,
		"--cursor-file", filepath.Join(t.TempDir(), "cursor")}

	first := startListen(t, bin, args...)
	require.True(t, local.Await(60*time.Second, func(r []receiver.Request) bool { return len(r) > half }),
		"listen forwarded %d of %d deliveries within 60 s; it logged:\n%s", local.Count(), half+1, first.stderr.String())
	// It posts a delivery only once the one before it is acknowledged
	// and its place kept: the 150 before the one held are.
	err := first.signal(t, syscall.SIGKILL)
	require.ErrorContains(t, err, "killed")
	require.Len(t, first.lines.Items(), half, "one line per acknowledged delivery")
	require.Equal(t, half+1, local.Count())

	second := startListen(t, bin, args...)
	require.True(t, local.Await(60*time.Second, func(r []receiver.Request) bool { return len(r) >= events+1 }),
		"after the restart listen forwarded %d of %d deliveries within 60 s; it logged:\n%s",
		local.Count()-half-1, events-half, second.stderr.String())
	second.awaitLines(t, events-half, 30*time.Second)
	// Its next read passes the last page: every delivery is marked
	// delivered (the first page by the restart's first read).
	for _, id := range []string{posted[0], posted[half], posted[events-1]} {
		require.Eventually(t, func() bool { return b.delivered(id) }, 30*time.Second, 20*time.Millisecond,
			"event %s's delivery is delivered", id)
	}
	require.NoError(t, second.signal(t, syscall.SIGTERM), "SIGTERM stops it cleanly; it logged:\n%s", second.stderr.String())

	got := local.Requests()
	times := map[string]int{}
	for _, r := range got {
		times[r.ID]++
	}
	var repeated, skipped []string
	for _, id := range posted {
		switch {
		case times[id] == 0:
			skipped = append(skipped, id)
		case times[id] > 1:
			repeated = append(repeated, id)
		}
	}
	require.Empty(t, skipped, "nothing is skipped")
	require.Equal(t, []string{posted[half]}, repeated,
		"forwarded again: only the delivery unanswered when killed (the 151st), nothing acknowledged")
	want := append(append([]string{}, posted[:half+1]...), posted[half:]...)
	require.Equal(t, want, ids(got), "in order")
	for i, r := range got {
		require.True(t, r.Verified, "request %d (%s): the signature verifies with the poll endpoint's secret", i, r.ID)
		require.Equal(t, string(bodies[r.ID]), string(r.Body), "request %d (%s): the body is the poll URL's, byte for byte", i, r.ID)
	}
	for i, line := range append(first.lines.Items(), second.lines.Items()...) {
		fields := strings.Fields(line)
		require.Len(t, fields, 4, "type, id, status, latency: %q", line)
		require.Equal(t, []string{"order.created", posted[i], "204"}, fields[:3], "line %d", i)
	}

	raw, err := os.ReadFile(args[len(args)-1])
	require.NoError(t, err)
	require.NotContains(t, string(raw), `"acked"`, "the cursor file holds the cursor after the last page: %s", raw)
}

// delivered reports whether the delivery of event id is delivered.
func (b *listenBundle) delivered(id string) bool {
	req, err := http.NewRequest(http.MethodGet, b.base+"/v1/deliveries?event_id="+id, nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+b.key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	var list struct{ Data []struct{ Status string } }
	return res.StatusCode == http.StatusOK && json.NewDecoder(res.Body).Decode(&list) == nil &&
		len(list.Data) == 1 && list.Data[0].Status == "delivered"
}

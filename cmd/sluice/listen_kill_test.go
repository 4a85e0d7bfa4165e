package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
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
// again (never acknowledged: at-least-once), and is killed again three
// quarters through, wherever it is. Restarted once more, it finishes.
// Every delivery arrives, in order; the only ones forwarded twice are
// the 151st and at most the one in flight at the second kill; every body
// is the one the poll URL holds, byte for byte, and its signature
// verifies.
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
	require.Equal(t, posted[:half], fieldOf(first.lines.Items(), 1), "one line per acknowledged delivery")
	require.Equal(t, half+1, local.Count())

	// Killed again wherever it is, three quarters through: posting a
	// delivery, reading the answer, replacing the cursor file or reading
	// a page. It posts the next delivery only once the place is kept, so
	// at most the last one the local server got may come again.
	second := startListen(t, bin, args...)
	require.True(t, local.Await(60*time.Second, func(r []receiver.Request) bool { return len(r) > half+1+events/4 }),
		"after the restart listen forwarded %d deliveries within 60 s; it logged:\n%s", local.Count()-half-1, second.stderr.String())
	require.ErrorContains(t, second.signal(t, syscall.SIGKILL), "killed")
	inFlight := local.Requests()[local.Count()-1].ID

	third := startListen(t, bin, args...)
	require.True(t, local.Await(60*time.Second, func(r []receiver.Request) bool { return unique(r) == events }),
		"after the second restart listen forwarded %d of %d deliveries within 60 s; it logged:\n%s",
		unique(local.Requests()), events, third.stderr.String())
	// Its next read passes the last page: every delivery is marked
	// delivered (the first pages by the restarts' reads).
	for _, id := range []string{posted[0], posted[half], posted[events-1]} {
		require.Eventually(t, func() bool { return b.delivered(id) }, 30*time.Second, 20*time.Millisecond,
			"event %s's delivery is delivered", id)
	}
	require.NoError(t, third.signal(t, syscall.SIGTERM), "SIGTERM stops it cleanly; it logged:\n%s", third.stderr.String())

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
		case times[id] > 1 && id != inFlight:
			repeated = append(repeated, id)
		}
	}
	require.Empty(t, skipped, "nothing is skipped")
	require.Equal(t, []string{posted[half]}, repeated,
		"forwarded again: the delivery unanswered at the first kill (the 151st) and at most the one in flight at the second, nothing acknowledged")
	require.LessOrEqual(t, times[inFlight], 2, "the delivery in flight at the second kill")
	t.Logf("the delivery in flight at the second kill (%s) was forwarded %d time(s)", inFlight, times[inFlight])
	k := slices.Index(posted, inFlight)
	want := slices.Concat(posted[:half+1], posted[half:k+1], posted[k+2-times[inFlight]:])
	require.Equal(t, want, ids(got), "in order")
	for i, r := range got {
		require.True(t, r.Verified, "request %d (%s): the signature verifies with the poll endpoint's secret", i, r.ID)
		require.Equal(t, string(bodies[r.ID]), string(r.Body), "request %d (%s): the body is the poll URL's, byte for byte", i, r.ID)
	}
	// A line once a delivery is acknowledged and its place kept: each
	// once, in order (the second kill may have come between the two).
	var printed []string
	for _, line := range slices.Concat(first.lines.Items(), second.lines.Items(), third.lines.Items()) {
		fields := strings.Fields(line)
		require.Len(t, fields, 4, "type, id, status, latency: %q", line)
		require.Equal(t, []string{"order.created", "204"}, []string{fields[0], fields[2]}, "line %q", line)
		printed = append(printed, fields[1])
	}
	if len(printed) == events-1 {
		printed = slices.Insert(printed, k, inFlight)
	}
	require.Equal(t, posted, printed, "a line per delivery, in order")

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

// unique is how many distinct webhook-ids reqs hold.
func unique(reqs []receiver.Request) int {
	seen := map[string]bool{}
	for _, r := range reqs {
		seen[r.ID] = true
	}
	return len(seen)
}

// fieldOf is field i of each line.
func fieldOf(lines []string, i int) []string {
	out := make([]string, len(lines))
	for j, l := range lines {
		if f := strings.Fields(l); len(f) > i {
			out[j] = f[i]
		}
	}
	return out
}

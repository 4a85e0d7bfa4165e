package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
)

// TestPollReaderKilledLosesNothing reads a poll endpoint from API
// processes killed with SIGKILL between reads and during a waiting read:
// a client that goes on with the last cursor it was given gets every
// event, in order, none twice, and the reads mark them delivered.
func TestPollReaderKilledLosesNothing(t *testing.T) {
	h := startWith(t, nil, app.Roles{API: true})
	var ep struct {
		ID      string `json:"id"`
		PollURL string `json:"poll_url"`
	}
	h.call(http.MethodPost, "/v1/endpoints", map[string]any{"delivery": "poll"}, http.StatusCreated, &ep)
	h.call(http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": ep.ID, "event_types": []string{"pull.*"}}, http.StatusCreated, nil)
	u, err := url.Parse(ep.PollURL)
	require.NoError(t, err)

	startReader := func() (*exec.Cmd, string) {
		addr := freeAddr(t)
		cmd := h.startChildWith("api", map[string]string{"SLUICE_ADDR": addr})
		eventually(t, 30*time.Second, func() bool { return readyz(addr) == http.StatusOK }, "the API process is ready")
		return cmd, addr
	}
	type page struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
		NextCursor string `json:"next_cursor"`
	}
	read := func(addr, query string) (page, error) {
		var p page
		res, err := http.Get("http://" + addr + u.Path + "?" + query)
		if err != nil {
			return p, err
		}
		defer res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
		return p, json.NewDecoder(res.Body).Decode(&p)
	}
	kill := func(cmd *exec.Cmd) {
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_, _ = cmd.Process.Wait()
	}

	var posted, got []string
	for i := range 10 {
		posted = append(posted, h.post("pull.item", map[string]any{"i": i}))
	}
	reader, addr := startReader()
	p, err := read(addr, "limit=4")
	require.NoError(t, err)
	cursor := p.NextCursor
	for _, d := range p.Data {
		got = append(got, d.ID)
	}
	kill(reader) // between a read and the next

	for i := 10; i < 15; i++ {
		posted = append(posted, h.post("pull.item", map[string]any{"i": i}))
	}
	reader, addr = startReader()
	for {
		p, err := read(addr, "limit=4&cursor="+cursor)
		require.NoError(t, err)
		if len(p.Data) == 0 {
			break
		}
		for _, d := range p.Data {
			got = append(got, d.ID)
		}
		cursor = p.NextCursor
	}

	// Killed while a read waits: the client's request fails, and it reads
	// again with the same cursor from another process.
	waiting := make(chan error, 1)
	go func() {
		_, err := read(addr, "wait=30&cursor="+cursor)
		waiting <- err
	}()
	eventually(t, 10*time.Second, func() bool {
		return pollWaiting(addr) == 1
	}, "the read is waiting")
	kill(reader)
	require.Error(t, <-waiting)
	posted = append(posted, h.post("pull.item", map[string]any{"i": 15}))
	_, addr = startReader()
	p, err = read(addr, "wait=30&cursor="+cursor)
	require.NoError(t, err)
	for _, d := range p.Data {
		got = append(got, d.ID)
	}
	require.Equal(t, posted, got, "every event once, in the order accepted")

	// A read waiting in one process is woken by a post committed in
	// another (the Nudger's notification), not by its deadline.
	cursor = p.NextCursor
	woken := make(chan page, 1)
	go func() {
		p, err := read(addr, "wait=30&cursor="+cursor)
		if err != nil {
			p = page{}
		}
		woken <- p
	}()
	eventually(t, 10*time.Second, func() bool { return pollWaiting(addr) == 1 }, "the read is waiting")
	last := h.post("pull.item", map[string]any{"i": 16})
	accepted := time.Now()
	p = <-woken
	t.Logf("a read waiting in another process answered %s after the post's 202", time.Since(accepted).Round(time.Millisecond))
	require.Less(t, time.Since(accepted), 5*time.Second)
	require.Len(t, p.Data, 1)
	require.Equal(t, last, p.Data[0].ID)

	_, err = read(addr, "cursor="+p.NextCursor)
	require.NoError(t, err)
	for _, d := range h.deliveries("endpoint_id=" + ep.ID) {
		require.Equal(t, "delivered", d.Status)
	}
}

// pollWaiting is the sluice_poll_waiting gauge of the process at addr, -1
// if it cannot be read.
func pollWaiting(addr string) int {
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "sluice_poll_waiting "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

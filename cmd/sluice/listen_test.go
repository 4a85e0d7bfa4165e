package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/poll"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// listenBundle is a real Sluice (`serve`, every role, on a loopback
// port) and a tenant's key on it, for `sluice listen` to read from.
type listenBundle struct {
	t    *testing.T
	base string // http://127.0.0.1:port
	key  string
}

func setupListen(t *testing.T) *listenBundle {
	t.Helper()
	useDatabase(t)
	_, key := createTenant(t, "Acme", "ops@acme.example")
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	t.Setenv("SLUICE_ENCRYPTION_KEY", base64.StdEncoding.EncodeToString(raw))
	t.Setenv("SLUICE_ADDR", "127.0.0.1:0")
	t.Setenv("SLUICE_ALLOW_PRIVATE_TARGETS", "true")
	t.Setenv("SLUICE_DRAIN_DELAY", "1ms")

	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, io.Discard, slog.New(slog.NewTextHandler(logs, nil))) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop within 30s of its context ending")
		}
	})
	addr := logs.await(t, regexp.MustCompile(`msg="ready: listening" url=http://(\S+)`), done, "that it is listening")
	return &listenBundle{t: t, base: "http://" + addr, key: key}
}

// do sends body (JSON text, or none) to the API and returns the status
// and the answer.
func (b *listenBundle) do(method, path, body string) (int, []byte) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.base+path, strings.NewReader(body))
	require.NoError(b.t, err)
	req.Header.Set("Authorization", "Bearer "+b.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(b.t, err)
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	require.NoError(b.t, err)
	return res.StatusCode, out
}

// endpoint creates an endpoint from body, subscribed to every event, and
// returns it with its secret.
func (b *listenBundle) endpoint(body string) (ep map[string]any, secret string) {
	b.t.Helper()
	status, raw := b.do(http.MethodPost, "/v1/endpoints", body)
	require.Equal(b.t, http.StatusCreated, status, string(raw))
	require.NoError(b.t, json.Unmarshal(raw, &ep))
	id := ep["id"].(string)
	status, raw = b.do(http.MethodPost, "/v1/subscriptions", `{"endpoint_id":"`+id+`","event_types":["*"]}`)
	require.Equal(b.t, http.StatusCreated, status, string(raw))
	status, raw = b.do(http.MethodGet, "/v1/endpoints/"+id+"/secret", "")
	require.Equal(b.t, http.StatusOK, status, string(raw))
	var s struct{ Secret string }
	require.NoError(b.t, json.Unmarshal(raw, &s))
	return ep, s.Secret
}

// pollEndpoint creates a poll endpoint and returns its poll URL, on the
// address serve listens on (SLUICE_PUBLIC_URL names port 0), and secret.
func (b *listenBundle) pollEndpoint() (pollURL, secret string) {
	b.t.Helper()
	ep, secret := b.endpoint(`{"delivery":"poll"}`)
	u, err := url.Parse(ep["poll_url"].(string))
	require.NoError(b.t, err)
	return b.base + u.Path, secret
}

// post posts an event of type order.created with payload (JSON text, kept
// as it is) and returns its id.
func (b *listenBundle) post(payload string) string {
	b.t.Helper()
	status, raw := b.do(http.MethodPost, "/v1/events", `{"type": "order.created", "payload": `+payload+`}`)
	require.Equal(b.t, http.StatusAccepted, status, string(raw))
	var ev struct{ ID string }
	require.NoError(b.t, json.Unmarshal(raw, &ev))
	return ev.ID
}

// pending is how many deliveries the poll URL answers from the start.
func (b *listenBundle) pending(pollURL string) int {
	b.t.Helper()
	res, err := http.Get(pollURL + "?limit=100")
	require.NoError(b.t, err)
	defer res.Body.Close()
	var page struct{ Data []json.RawMessage }
	require.NoError(b.t, json.NewDecoder(res.Body).Decode(&page))
	return len(page.Data)
}

// listening is a running listener: what it printed and logged, and its
// end.
type listening struct {
	out, logs *syncBuffer
	cancel    context.CancelFunc
	done      chan error
}

// listen starts a listener on cfg (Out and Logger its own).
func listen(t *testing.T, cfg listenConfig) *listening {
	t.Helper()
	l := &listening{out: &syncBuffer{}, logs: &syncBuffer{}, done: make(chan error, 1)}
	cfg.Out, cfg.Logger = l.out, slog.New(slog.NewTextHandler(l.logs, nil))
	lis, err := newListener(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go func() { l.done <- lis.run(ctx) }()
	t.Cleanup(func() { _ = l.stop(t) })
	return l
}

// stop ends the listener and returns what run returned.
func (l *listening) stop(t *testing.T) error {
	t.Helper()
	l.cancel()
	select {
	case err := <-l.done:
		l.done <- err // for a second stop
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("listen did not stop within 30s of its context ending")
		return nil
	}
}

func ids(reqs []receiver.Request) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.ID
	}
	return out
}

// TestListenForwardsAsPushed: what `sluice listen` posts to the local
// server is what a push endpoint of the same events gets, byte for byte,
// with a signature the Standard Webhooks library verifies under the poll
// endpoint's secret; one line per delivery; a local 500 is retried, after
// a backoff, and not skipped; and a local server that is down is said to
// be unreachable and retried until it is up.
func TestListenForwardsAsPushed(t *testing.T) {
	b := setupListen(t)
	pushed := receiver.New(t)
	b.endpoint(`{"url":"` + pushed.URL() + `"}`)
	pollURL, secret := b.pollEndpoint()

	local := receiver.New(t)
	require.NoError(t, local.SetSecret(secret))
	local.AnswerFunc(func(n int) receiver.Behavior {
		if n == 1 {
			return receiver.Behavior{Status: http.StatusInternalServerError}
		}
		return receiver.Behavior{Status: http.StatusNoContent}
	})
	var backoffs atomic.Int64
	cursorFile := filepath.Join(t.TempDir(), "cursor")
	l := listen(t, listenConfig{
		PollURL: pollURL, ForwardTo: local.URL(), Secret: secret, CursorFile: cursorFile,
		Backoff: func(failures int) time.Duration { backoffs.Add(1); return 0 },
	})

	first := b.post(`{ "n" : 1,  "html": "<a href=\"x\">&amp;</a>", "e": "é\u00e9", "list": [1, 2.50, null] }`)
	second := b.post(`{"n":2}`)
	require.True(t, local.Await(30*time.Second, func(r []receiver.Request) bool { return len(r) >= 3 }), "listen forwarded %v", ids(local.Requests()))
	require.True(t, pushed.Await(30*time.Second, func(r []receiver.Request) bool { return len(r) >= 2 }))

	got := local.Requests()
	require.Equal(t, []string{first, first, second}, ids(got), "the 500 was retried, in order, nothing skipped")
	require.EqualValues(t, 1, backoffs.Load(), "one failure, one backoff")
	byID := map[string][]byte{}
	for _, r := range pushed.Requests() {
		byID[r.ID] = r.Body
	}
	for _, r := range got {
		require.True(t, r.Verified, "the signature verifies with the poll endpoint's secret")
		require.Equal(t, string(byID[r.ID]), string(r.Body), "the body is the pushed body, byte for byte")
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
		require.NotEmpty(t, r.Header.Get("webhook-timestamp"))
	}
	require.Contains(t, string(got[0].Body), `"data":{ "n" : 1,  "html": "<a href=\"x\">&amp;</a>"`)

	line := regexp.MustCompile(`(?m)^order\.created (\S+) 204 \S+s\n`)
	l.out.await(t, regexp.MustCompile(`(?s)(`+second+`)`), l.done, "the second delivery's line")
	lines := line.FindAllStringSubmatch(l.out.String(), -1)
	require.Len(t, lines, 2, "one line per delivery: %q", l.out.String())
	require.Equal(t, first, lines[0][1])
	require.Equal(t, second, lines[1][1])
	require.Equal(t, 2, strings.Count(l.out.String(), "\n"), "nothing else is printed: %q", l.out.String())
	require.Contains(t, l.logs.String(), "did not acknowledge")
	require.Contains(t, l.logs.String(), "status=500")
	require.NoError(t, l.stop(t), "a stopped listener ends cleanly")

	var state cursorState
	raw, err := os.ReadFile(cursorFile)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &state))
	require.NotEmpty(t, state.Cursor, "the cursor moved past the page")
	require.Zero(t, state.Acked)

	// A local server that is down: said so, and retried until it is up.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	l = listen(t, listenConfig{
		PollURL: pollURL, ForwardTo: "http://" + addr + "/hook", Secret: secret, CursorFile: cursorFile,
		Backoff: func(int) time.Duration { return 5 * time.Millisecond },
	})
	third := b.post(`{"n":3}`)
	l.logs.await(t, regexp.MustCompile(`(the local server is unreachable)`), l.done, "that the local server is unreachable")
	require.Contains(t, l.logs.String(), "connection refused")
	ln, err = net.Listen("tcp", addr)
	require.NoError(t, err, "the port was taken meanwhile")
	arrived := make(chan string, 10)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Header.Get("webhook-id")
	}))
	up.Listener = ln
	up.Start()
	t.Cleanup(up.Close)
	select {
	case id := <-arrived:
		require.Equal(t, third, id, "the new delivery, nothing from before the restart")
	case <-time.After(30 * time.Second):
		t.Fatal("nothing was forwarded within 30 s of the local server coming up")
	}
	l.out.await(t, regexp.MustCompile(`(`+third+` 200)`), l.done, "the third delivery's line")
	require.NoError(t, l.stop(t))
	require.Empty(t, arrived, "forwarded once")
}

// TestListenRestartNeitherSkipsNorRepeats stops a listener half way
// through a page, as a kill would: the restarted one forwards the rest of
// the page, then what came after, and nothing the local server had
// acknowledged.
func TestListenRestartNeitherSkipsNorRepeats(t *testing.T) {
	b := setupListen(t)
	pollURL, secret := b.pollEndpoint()
	events := []string{b.post(`{"n":1}`), b.post(`{"n":2}`), b.post(`{"n":3}`)}
	require.Eventually(t, func() bool { return b.pending(pollURL) == 3 }, 30*time.Second, 20*time.Millisecond,
		"the three deliveries are on one page")

	local := receiver.New(t)
	require.NoError(t, local.SetSecret(secret))
	local.AnswerFunc(func(n int) receiver.Behavior {
		if n == 3 {
			return receiver.Behavior{Delay: time.Minute} // answered by no one: the listener is stopped meanwhile
		}
		return receiver.Behavior{}
	})
	cfg := listenConfig{PollURL: pollURL, ForwardTo: local.URL(), Secret: secret, CursorFile: filepath.Join(t.TempDir(), "cursor")}
	l := listen(t, cfg)
	require.True(t, local.Await(30*time.Second, func(r []receiver.Request) bool { return len(r) == 3 }))
	require.NoError(t, l.stop(t))
	require.Equal(t, events, ids(local.Requests()))

	var state cursorState
	raw, err := os.ReadFile(cfg.CursorFile)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &state))
	require.Equal(t, cursorState{Cursor: "", Acked: 2, LastID: events[1]}, state, "two of the first page acknowledged")

	events = append(events, b.post(`{"n":4}`))
	local.Answer(receiver.Behavior{})
	l = listen(t, cfg)
	require.True(t, local.Await(30*time.Second, func(r []receiver.Request) bool { return len(r) >= 5 }))
	l.out.await(t, regexp.MustCompile(`(`+events[3]+`)`), l.done, "the fourth delivery's line")
	require.NoError(t, l.stop(t))
	require.Equal(t, append(events[:3:3], events[2:]...), ids(local.Requests()),
		"the third again (never acknowledged), then the fourth")

	events = append(events, b.post(`{"n":5}`))
	l = listen(t, cfg)
	require.True(t, local.Await(30*time.Second, func(r []receiver.Request) bool { return len(r) >= 6 }))
	require.NoError(t, l.stop(t))
	require.Equal(t, events[4], local.Requests()[5].ID, "after a whole page, the next")
	require.Len(t, local.Requests(), 6)
	for _, r := range local.Requests() {
		require.True(t, r.Verified)
	}
	for _, id := range events[:4] {
		status, raw := b.do(http.MethodGet, "/v1/deliveries?event_id="+id, "")
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, string(raw), `"status":"delivered"`, "the listener's reads passed it")
	}
}

// TestListenStopsOnAWrongPollURL: flags that cannot work, a poll URL
// Sluice does not know, a cursor it did not give and a URL that is no
// poll URL each stop `sluice listen` at once, saying what is wrong.
func TestListenStopsOnAWrongPollURL(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	good := "http://127.0.0.1:1/poll/0123456789abcdef0123456789abcdef_mac"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--forward-to", "http://localhost:8000/"}, "--poll-url is required"},
		{[]string{"--poll-url", "sluice.example/poll/x", "--forward-to", "http://localhost:8000/"}, "is not a poll URL"},
		{[]string{"--poll-url", "http://sluice.example/v1/endpoints", "--forward-to", "http://localhost:8000/"}, "is not a poll URL"},
		{[]string{"--poll-url", "http://sluice.example/poll/", "--forward-to", "http://localhost:8000/"}, "is not a poll URL"},
		{[]string{"--poll-url", "http://%zz/poll/x", "--forward-to", "http://localhost:8000/"}, "is not a poll URL"},
		{[]string{"--poll-url", good}, "--forward-to is required"},
		{[]string{"--poll-url", good, "--forward-to", "localhost:8000"}, "is not an http or https URL"},
		{[]string{"--poll-url", good, "--forward-to", "http://localhost:8000/", "--secret", "hunter2"}, "--secret is not a signing secret"},
		{[]string{"--poll-url", good, "--forward-to", "http://localhost:8000/", "--colour", "red"}, "parse listen flags"},
	} {
		_, err := runCmd(t, append([]string{"listen"}, c.args...)...)
		require.ErrorContains(t, err, c.want, c.args)
	}

	// The default cursor file: under the user's config directory, one per
	// endpoint, the same after its secret's rotation changed its token.
	path := func(raw string) string {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		p, err := listenCursorFile(u)
		require.NoError(t, err)
		return p
	}
	_, err := newListener(listenConfig{PollURL: "https://example.com/sluice/poll/0123_mac", ForwardTo: "http://localhost:8000/"})
	require.NoError(t, err, "SLUICE_PUBLIC_URL may have a path")
	dir, err := os.UserConfigDir()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "sluice"), filepath.Dir(path(good)))
	require.Equal(t, path(good), path("http://127.0.0.1:1/poll/0123456789abcdef0123456789abcdef_other"))
	require.NotEqual(t, path(good), path("http://127.0.0.1:1/poll/f123456789abcdef0123456789abcdef_mac"))
	require.NotEqual(t, path(good), path("http://127.0.0.2:1/poll/0123456789abcdef0123456789abcdef_mac"))

	b := setupListen(t)
	pollURL, secret := b.pollEndpoint()
	local := receiver.New(t)
	stopped := func(cfg listenConfig) error {
		t.Helper()
		cfg.ForwardTo, cfg.Secret = local.URL(), secret
		cfg.CursorFile = cmp.Or(cfg.CursorFile, filepath.Join(t.TempDir(), "cursor"))
		lis, err := newListener(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err = lis.run(ctx)
		require.NoError(t, ctx.Err(), "it stopped by itself")
		require.Error(t, err)
		return err
	}

	u, err := url.Parse(pollURL)
	require.NoError(t, err)
	token := strings.TrimPrefix(u.Path, "/poll/")
	err = stopped(listenConfig{PollURL: b.base + "/poll/" + token[:len(token)-2] + "AA"})
	require.ErrorContains(t, err, "answers 404")
	require.ErrorContains(t, err, "rotated")
	require.NotContains(t, err.Error(), token[33:], "the message keeps the token to itself")
	require.ErrorContains(t, err, b.base+"/poll/…")

	cursorFile := filepath.Join(t.TempDir(), "cursor")
	require.NoError(t, os.WriteFile(cursorFile, []byte(`{"cursor":"`+poll.EncodeCursor(999)+`"}`), 0o600))
	err = stopped(listenConfig{PollURL: pollURL, CursorFile: cursorFile})
	require.ErrorContains(t, err, "the cursor in "+cursorFile+" is not one this poll URL gave")

	require.NoError(t, os.WriteFile(cursorFile, []byte("nonsense"), 0o600))
	err = stopped(listenConfig{PollURL: pollURL, CursorFile: cursorFile})
	require.ErrorContains(t, err, "is not a cursor file sluice listen wrote")

	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "<html>hello</html>")
	}))
	t.Cleanup(other.Close)
	err = stopped(listenConfig{PollURL: other.URL + "/poll/x"})
	require.ErrorContains(t, err, "does not answer as a poll URL does")
	require.Zero(t, local.Count(), "nothing was forwarded")
}

// TestListenBackoffIsCapped: the default backoff doubles from 250 ms and
// stays at 10 s.
func TestListenBackoffIsCapped(t *testing.T) {
	require.Equal(t, 250*time.Millisecond, listenBackoff(1))
	require.Equal(t, 500*time.Millisecond, listenBackoff(2))
	require.Equal(t, 8*time.Second, listenBackoff(6))
	require.Equal(t, 10*time.Second, listenBackoff(7))
	require.Equal(t, 10*time.Second, listenBackoff(1000))
}

package send_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/send"
)

// recorder is a receiver that keeps what it was sent and counts connections.
type recorder struct {
	srv   *httptest.Server
	conns atomic.Int32
	hits  atomic.Int32
	mu    sync.Mutex
	reqs  []recorded
}

type recorded struct {
	header http.Header
	body   []byte
}

func newRecorder(t *testing.T, h http.HandlerFunc) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.hits.Add(1)
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, recorded{r.Header.Clone(), body})
		rec.mu.Unlock()
		if h != nil {
			h(w, r)
		}
	}))
	rec.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			rec.conns.Add(1)
		}
	}
	rec.srv.Start()
	t.Cleanup(rec.srv.Close)
	return rec
}

func (r *recorder) last(t *testing.T) recorded {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.NotEmpty(t, r.reqs)
	return r.reqs[len(r.reqs)-1]
}

func devSender(timeout time.Duration) *send.Sender {
	return send.New(send.Config{AllowPrivate: true, Timeout: timeout})
}

func msg(url string) send.Message {
	return send.Message{URL: url, ID: "evt_1", Timestamp: time.Now(), Body: []byte(`{"id":"evt_1"}`)}
}

func TestDeliveredSignedForBothKeys(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	secretNew, secretOld := send.NewSecret(), send.NewSecret()
	keyNew, err := send.Key(secretNew)
	require.NoError(t, err)
	keyOld, err := send.Key(secretOld)
	require.NoError(t, err)

	m := msg(rec.srv.URL + "/hook")
	m.Keys = [][]byte{keyNew, keyOld}
	m.Headers = map[string]string{
		"X-Tenant":          "acme",
		"webhook-signature": "v1,forged",
		"Content-Type":      "text/plain",
		"Connection":        "close",
	}
	res := devSender(0).Send(context.Background(), m)

	require.True(t, res.Delivered(), res.Err)
	require.False(t, res.Throttled())
	require.Equal(t, 200, res.StatusCode)
	require.Empty(t, res.Err)
	require.Equal(t, "ok", res.Body)
	require.Positive(t, res.Latency)
	require.WithinDuration(t, time.Now(), res.At, 5*time.Second)

	got := rec.last(t)
	require.Equal(t, m.Body, got.body)
	require.Equal(t, "application/json", got.header.Get("Content-Type"))
	require.Equal(t, send.DefaultUserAgent, got.header.Get("User-Agent"))
	require.Equal(t, "evt_1", got.header.Get("Webhook-Id"))
	require.Equal(t, "acme", got.header.Get("X-Tenant"))
	require.Len(t, strings.Split(got.header.Get("Webhook-Signature"), " "), 2)
	for _, secret := range []string{secretNew, secretOld} {
		wh, err := standardwebhooks.NewWebhook(secret)
		require.NoError(t, err)
		require.NoError(t, wh.Verify(got.body, got.header))
	}
	wh, err := standardwebhooks.NewWebhook(send.NewSecret())
	require.NoError(t, err)
	require.Error(t, wh.Verify(got.body, got.header), "an unrelated secret must not verify")
}

func TestServerErrorKeepsFirstKiB(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, strings.Repeat("x", 5<<10))
	})
	res := devSender(0).Send(context.Background(), msg(rec.srv.URL))
	require.False(t, res.Delivered())
	require.Equal(t, 500, res.StatusCode)
	require.Equal(t, "status 500", res.Err)
	require.Equal(t, strings.Repeat("x", 1024), res.Body)
}

func TestBodyIsCleanUTF8(t *testing.T) {
	t.Parallel()
	// 1023 ASCII bytes then a 3-byte rune cut by the limit; NUL and invalid bytes earlier.
	payload := "a\x00b\xffc" + strings.Repeat("y", 1018) + "€€"
	rec := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, payload)
	})
	res := devSender(0).Send(context.Background(), msg(rec.srv.URL))
	require.Equal(t, 400, res.StatusCode)
	require.LessOrEqual(t, len(res.Body), 1024)
	require.NotContains(t, res.Body, "\x00")
	require.True(t, strings.HasPrefix(res.Body, "a\uFFFDb\uFFFDc"), res.Body[:12])
	require.True(t, strings.HasSuffix(res.Body, "y"), "the split rune is dropped")
}

func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	target := newRecorder(t, nil)
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.srv.URL, http.StatusFound)
	})
	res := devSender(0).Send(context.Background(), msg(rec.srv.URL))
	require.False(t, res.Delivered())
	require.Equal(t, 302, res.StatusCode)
	require.Equal(t, "redirect (302) not followed", res.Err)
	require.EqualValues(t, 1, rec.hits.Load())
	require.Zero(t, target.hits.Load())
	require.Zero(t, target.conns.Load())
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	s := devSender(0)
	cases := []struct {
		name      string
		status    int
		header    string
		lo, hi    time.Duration
		throttled bool
	}{
		{"429 seconds", 429, "7", 7 * time.Second, 7 * time.Second, true},
		{"429 http-date", 429, "in 10s", 8 * time.Second, 10 * time.Second, true},
		{"503 seconds", 503, "120", 2 * time.Minute, 2 * time.Minute, false},
		{"429 absent", 429, "", 0, 0, true},
		{"429 invalid", 429, "soon", 0, 0, true},
		{"429 negative", 429, "-5", 0, 0, true},
		{"503 past date", 503, time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat), 0, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
				switch {
				case tc.header == "in 10s": // an HTTP-date, made as the answer is
					w.Header().Set("Retry-After", time.Now().Add(10*time.Second).UTC().Format(http.TimeFormat))
				case tc.header != "":
					w.Header().Set("Retry-After", tc.header)
				}
				w.WriteHeader(tc.status)
			})
			res := s.Send(context.Background(), msg(rec.srv.URL))
			require.Equal(t, tc.status, res.StatusCode)
			require.Equal(t, tc.throttled, res.Throttled())
			require.False(t, res.Delivered())
			require.GreaterOrEqual(t, res.RetryAfter, tc.lo)
			require.LessOrEqual(t, res.RetryAfter, tc.hi)
		})
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done(): // the client went away
		case <-time.After(10 * time.Second):
		}
	})
	res := devSender(100*time.Millisecond).Send(context.Background(), msg(rec.srv.URL))
	require.False(t, res.Delivered())
	require.Zero(t, res.StatusCode)
	require.Equal(t, "timeout after 100ms", res.Err)
	require.True(t, res.TimedOut(), "what slows an adaptive endpoint down")
	require.GreaterOrEqual(t, res.Latency, 100*time.Millisecond)
	require.Less(t, res.Latency, 2*time.Second)
}

func TestCanceledByCaller(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := newRecorder(t, nil)
	res := devSender(0).Send(ctx, msg(rec.srv.URL))
	require.Equal(t, "canceled", res.Err)
	require.Zero(t, rec.hits.Load())
}

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	res := devSender(0).Send(context.Background(), msg("http://"+addr+"/hook"))
	require.False(t, res.Delivered())
	require.Zero(t, res.StatusCode)
	require.Equal(t, "connection refused", res.Err)
	require.False(t, res.TimedOut())
}

func TestInvalidURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"ftp://example.com/x", "/relative", "http://", "::"} {
		res := devSender(0).Send(context.Background(), msg(u))
		require.Zero(t, res.StatusCode, u)
		require.Contains(t, res.Err, "invalid URL", u)
	}
}

func TestSSRFGuard(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, nil)

	res := send.New(send.Config{}).Send(context.Background(), msg(rec.srv.URL))
	require.False(t, res.Delivered())
	require.Zero(t, res.StatusCode)
	require.Equal(t, "destination address is not allowed (private/loopback)", res.Err)
	require.Zero(t, rec.hits.Load())
	require.Zero(t, rec.conns.Load(), "the guard refuses before connecting")

	res = devSender(0).Send(context.Background(), msg(rec.srv.URL))
	require.True(t, res.Delivered(), res.Err)
	require.EqualValues(t, 1, rec.hits.Load())
}

func TestSSRFGuardKeepsMetadataClosed(t *testing.T) {
	t.Parallel()
	// Cloud metadata and link-local stay refused even with AllowPrivate; the
	// check runs before connect, so nothing leaves the machine.
	for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/latest/meta-data/", "http://[fe80::1]:8080/"} {
		res := devSender(0).Send(context.Background(), msg(u))
		require.Equal(t, "destination address is not allowed (cloud metadata)", res.Err, u)
	}
	res := devSender(0).Send(context.Background(), msg("http://0.0.0.0:1/"))
	require.Equal(t, "destination address is not allowed (private/loopback)", res.Err)
}

func TestKeepAliveReuse(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("z", 10<<10)) // more than the logged KiB
	})
	s := devSender(0)
	for range 20 {
		res := s.Send(context.Background(), msg(rec.srv.URL))
		require.True(t, res.Delivered(), res.Err)
	}
	require.EqualValues(t, 20, rec.hits.Load())
	require.EqualValues(t, 1, rec.conns.Load())
}

func TestReservedHeadersNeverSent(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, nil)
	m := msg(rec.srv.URL)
	m.Headers = map[string]string{"X-Custom": "yes", "Expect": "100-continue"}
	for _, h := range send.ReservedHeaders {
		if _, ok := m.Headers[h]; !ok && h != "Host" && h != "Content-Length" && h != "Transfer-Encoding" {
			m.Headers[strings.ToLower(h)] = "forged"
		}
	}
	res := devSender(0).Send(context.Background(), m)
	require.True(t, res.Delivered(), res.Err)
	require.Less(t, res.Latency, 900*time.Millisecond, "no Expect: 100-continue wait")
	got := rec.last(t)
	require.Equal(t, "yes", got.header.Get("X-Custom"))
	for _, h := range []string{"Keep-Alive", "Proxy-Connection", "Trailer", "Proxy-Authorization", "Proxy-Authenticate", "Upgrade", "Te", "Expect"} {
		require.Empty(t, got.header.Get(h), h)
	}
	require.NotEqual(t, "forged", got.header.Get("Webhook-Signature"))
	require.NotEqual(t, "forged", got.header.Get("User-Agent"))
}

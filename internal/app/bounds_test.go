package app_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
)

// serveBounded serves h with the server Serve uses. readTimeout, when not
// zero, stands in for app.ReadTimeout so that a test need not wait 30 s.
func serveBounded(t *testing.T, h http.Handler, readTimeout time.Duration) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config = app.NewHTTPServer(h)
	if readTimeout > 0 {
		srv.Config.ReadTimeout = readTimeout
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// TestSlowBodiesAreCut opens 50 connections that send a request's headers
// and then its body a byte at a time: the server closes every one once
// its read timeout has passed. SLUICE_TEST_REAL_TIMEOUTS=1 runs it with
// the real 30 s timeout and a byte every 5 s; by default the timeout is
// 2 s and a byte comes every 500 ms.
func TestSlowBodiesAreCut(t *testing.T) {
	h := start(t, nil)
	timeout, every := 2*time.Second, 500*time.Millisecond
	if os.Getenv("SLUICE_TEST_REAL_TIMEOUTS") != "" {
		timeout, every = 0, 5*time.Second
	}
	srv := serveBounded(t, h.proc.Handler, timeout)
	if timeout == 0 {
		timeout = app.ReadTimeout
	}
	const conns = 50
	start := time.Now()
	cut := make([]time.Duration, conns)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
				"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n", h.key)
			// Read what the server answers, if anything, until it hangs up.
			closed := make(chan struct{})
			go func() {
				_, _ = io.Copy(io.Discard, c)
				close(closed)
			}()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-closed:
					cut[i] = time.Since(start)
					return
				case <-tick.C:
					_, _ = c.Write([]byte{' '})
				case <-time.After(timeout + 10*time.Second):
					t.Errorf("connection %d still open after %s", i, time.Since(start))
					return
				}
			}
		}()
	}
	wg.Wait()
	var longest time.Duration
	for _, d := range cut {
		longest = max(longest, d)
	}
	t.Logf("%d slow-body connections, read timeout %s: all cut, the last after %s", conns, timeout, longest.Round(time.Millisecond))
	require.Less(t, longest, timeout+3*time.Second)
}

// TestBatchMemory posts 20 batches of about 31 MB at once, each of its
// client retrying a 503 after its Retry-After, and samples this process's
// RSS (server and clients; the clients stream their bodies from one shared
// event, so nearly all of it is the server's) until all are accepted. It
// stores 620 MB of events, so it runs only with SLUICE_TEST_BATCH_RSS=1.
func TestBatchMemory(t *testing.T) {
	if os.Getenv("SLUICE_TEST_BATCH_RSS") == "" {
		t.Skip("set SLUICE_TEST_BATCH_RSS=1 to post 20 × 31 MB batches and measure RSS")
	}
	h := startWith(t, nil, app.Roles{API: true})
	srv := serveBounded(t, h.proc.Handler, 0)

	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak.Store(max(peak.Load(), rssBytes(t)))
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	before := rssBytes(t)

	event := []byte(fmt.Sprintf(`{"type":"big.batch","payload":{"pad":%q}}`, strings.Repeat("x", 31_000)))
	const batches, events = 20, 1000
	var refused atomic.Int64
	started := time.Now()
	var wg sync.WaitGroup
	for range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(started) < 5*time.Minute {
				status, retry := postBatch(t, srv, h.key, event, events)
				if status == http.StatusAccepted {
					return
				}
				if status != http.StatusServiceUnavailable && status != 0 {
					t.Errorf("batch answered %d", status)
					return
				}
				refused.Add(1)
				time.Sleep(retry) // the client's part, not a wait for Sluice: it obeys Retry-After
			}
			t.Error("batch not accepted within 5 minutes")
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	t.Logf("%d batches of %d events (%.1f MB each) accepted in %s after %d 503s; RSS %d MB before, peak %d MB",
		batches, events, float64(batchLen(event, events))/1e6, time.Since(started).Round(time.Second), refused.Load(),
		before>>20, peak.Load()>>20)
	require.Less(t, peak.Load(), int64(512<<20), "peak RSS")
}

// postBatch posts a batch of n copies of event, streamed, and returns the
// status and Retry-After.
func postBatch(t *testing.T, srv *httptest.Server, key string, event []byte, n int) (int, time.Duration) {
	parts := []io.Reader{strings.NewReader(`{"events":[`)}
	for i := range n {
		if i > 0 {
			parts = append(parts, strings.NewReader(","))
		}
		parts = append(parts, bytes.NewReader(event))
	}
	parts = append(parts, strings.NewReader("]}"))
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/events/batch", io.MultiReader(parts...))
	require.NoError(t, err)
	req.ContentLength = batchLen(event, n)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := srv.Client().Do(req)
	if err != nil {
		return 0, time.Second // a refused body may be cut off mid-write
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	retry, _ := strconv.Atoi(res.Header.Get("Retry-After"))
	return res.StatusCode, time.Duration(max(retry, 1)) * time.Second
}

func batchLen(event []byte, n int) int64 {
	return int64(len(`{"events":[`) + n*len(event) + (n - 1) + len("]}"))
}

// rssBytes is this process's resident set size.
func rssBytes(t *testing.T) int64 {
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

package httpapi_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
	"github.com/sluice-dev/sluice/internal/testkit/dispatchtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// countingReader counts the bytes a client sends of a body.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// TestRefusedBatchesGetTheirAnswer holds the one turn for large batches and
// posts more over real connections: each is answered 503 with Retry-After,
// never a connection reset. A client that sends "Expect: 100-continue" gets
// the 503 without sending a byte of its body; one that sends the body at
// once has it read and discarded after the answer, so that one which
// reads the answer only after sending the whole body gets it too. A client
// that waits for 100 Continue gets it when its batch is admitted.
func TestRefusedBatchesGetTheirAnswer(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	api := httpapi.New(controltest.New(f.Store, controltest.Options{Nudger: dispatchtest.Nudger(f.Store, f.Jobs)}), httpapi.Config{Ingest: httpapi.StartIngest(t, f.Store, dispatchtest.Nudger(f.Store, f.Jobs)), APIRate: testRate, MaxLargeBatches: 1})
	admitted := make(chan struct{}, 1)
	h := api.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Test-Hold") != "" { // the body is read once the batch is admitted
			r.Body = readHook{r.Body, func() {
				select {
				case admitted <- struct{}{}:
				default:
				}
			}}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	post := func(client *http.Client, body io.Reader, length int64, header map[string]string) (*http.Response, []byte, error) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/events/batch", body)
		require.NoError(t, err)
		req.ContentLength = length
		req.Header.Set("Authorization", "Bearer "+f.KeyA)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := client.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer res.Body.Close()
		got, err := io.ReadAll(res.Body)
		return res, got, err
	}

	// The first large batch is admitted and waits for the rest of its body.
	first := newPendingBody()
	releaseFirst := sync.OnceFunc(func() { close(first.release) })
	t.Cleanup(releaseFirst) // before the server closes: a failing test must not hang there
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		res, _, err := post(&http.Client{}, io.MultiReader(strings.NewReader(`{"events":[`), first), 2<<20, map[string]string{"X-Test-Hold": "1"})
		if err == nil { // the client gives up on its own broken body, or is answered 400
			assert.Equal(t, http.StatusBadRequest, res.StatusCode)
		}
	}()
	select {
	case <-admitted:
	case <-time.After(10 * time.Second):
		t.Fatal("the first batch was not admitted")
	}

	// Refused while the body is on its way: the client reads the 503.
	const size = 8 << 20
	for i := range 5 {
		client := &http.Client{Transport: &http.Transport{}}
		res, got, err := post(client, bytes.NewReader(bytes.Repeat([]byte{' '}, size)), size, nil)
		require.NoError(t, err, "post %d: the refused client gets an answer, not a reset", i)
		require.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "%s", got)
		require.Equal(t, "1", res.Header.Get("Retry-After"))
		require.Contains(t, string(got), "too many large batches")
		client.CloseIdleConnections()
	}

	// A client that sends its whole request before it reads the answer
	// (as many do) reads the 503 too: its body was read, not reset.
	for i := range 3 {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		require.NoError(t, err)
		require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
		fmt.Fprintf(c, "POST /v1/events/batch HTTP/1.1\r\nHost: sluice\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", f.KeyA, size)
		_, err = c.Write(bytes.Repeat([]byte{' '}, size))
		require.NoError(t, err, "raw post %d: the body is taken whole", i)
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err, "raw post %d", i)
		require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
		require.Equal(t, "1", res.Header.Get("Retry-After"))
		res.Body.Close()
		c.Close()
	}

	// Refused before the body is sent: none of it goes.
	expecting := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Minute}}
	body := &countingReader{r: bytes.NewReader(bytes.Repeat([]byte{' '}, size))}
	res, got, err := post(expecting, body, size, map[string]string{"Expect": "100-continue"})
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "%s", got)
	require.Equal(t, "1", res.Header.Get("Retry-After"))
	require.Zero(t, body.n.Load(), "the body of a refused batch is not sent")

	releaseFirst()
	<-firstDone

	// Admitted once the turn is free (the first's handler returns after
	// its client has gone): 100 Continue, then the body, then 202.
	event := fmt.Sprintf(`{"type":"a","payload":{"pad":"%s"}}`, strings.Repeat("x", 250<<10))
	big := `{"events":[` + strings.Repeat(event+",", 4) + event + `]}`
	require.Eventually(t, func() bool {
		body = &countingReader{r: strings.NewReader(big)}
		res, got, err = post(expecting, body, int64(len(big)), map[string]string{"Expect": "100-continue"})
		require.NoError(t, err)
		if res.StatusCode == http.StatusServiceUnavailable {
			require.Zero(t, body.n.Load())
			return false
		}
		require.Equal(t, http.StatusAccepted, res.StatusCode, "%.300s", got)
		return true
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, int64(len(big)), body.n.Load(), "the admitted body is sent whole")
}

// readHook calls hook before each read of the body.
type readHook struct {
	io.ReadCloser
	hook func()
}

func (r readHook) Read(b []byte) (int, error) {
	r.hook()
	return r.ReadCloser.Read(b)
}

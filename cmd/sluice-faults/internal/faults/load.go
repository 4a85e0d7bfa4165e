package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Post is the outcome of one event's POST, after any retries.
type Post struct {
	Seq     int
	Sent    time.Time // the first attempt
	Done    time.Time // the last attempt's answer
	Status  int       // of the last attempt; 0 when no response came back
	Err     string    // transport error of the last attempt, if any
	EventID string    // from a 2xx answer
	// Retried lists the outcomes (StatusKey) of the attempts before the
	// last, which were answered 503 or 429 or not at all.
	Retried []string
	// Attempts are every attempt's times and status, the last included.
	Attempts []Attempt
}

// Attempt is one request of a post: when it was sent, when its answer (or
// its transport error) came, and the status (0: none).
type Attempt struct {
	Sent, Done time.Time
	Status     int
}

// StatusKey names the outcome for the status table: "202", "503", "conn".
func (p Post) StatusKey() string {
	if p.Status == 0 {
		return "err"
	}
	return strconv.Itoa(p.Status)
}

// Accepted reports whether the post was answered 2xx.
func (p Post) Accepted() bool { return p.Status >= 200 && p.Status < 300 }

// Load posts Count requests from Clients goroutines at most Rate per second
// (0: as fast as they go), each built by Body. It stops early when ctx ends
// (every loop is bounded in count and time).
type Load struct {
	BaseURL string
	APIKey  string
	Count   int
	Clients int
	Rate    float64
	// Request makes request seq: its body and extra headers. Raw, when set,
	// is sent byte for byte over its own connection instead (headers Go's
	// client refuses to send, such as a NUL in a header value).
	Request func(seq int) (body []byte, header map[string]string, raw bool)
	Timeout time.Duration // per request; default 10s
	// RetryFor, when set, makes a sender post an event again, as a client
	// would, while it is answered 503 or 429 or not at all (Retry-After
	// obeyed up to a second), for at most this long after the first try.
	RetryFor time.Duration
}

// Run posts and returns every outcome, in seq order.
func (l Load) Run(ctx context.Context) []Post {
	timeout := l.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{
		Proxy: nil, MaxIdleConns: l.Clients, MaxIdleConnsPerHost: l.Clients, IdleConnTimeout: 30 * time.Second,
	}}
	defer client.CloseIdleConnections()
	posts := make([]Post, l.Count)
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range l.Clients {
		wg.Go(func() {
			for {
				seq := int(next.Add(1) - 1)
				if seq >= l.Count || ctx.Err() != nil {
					return
				}
				if l.Rate > 0 { // pace: request seq goes at start + seq/rate
					at := start.Add(time.Duration(float64(seq) / l.Rate * float64(time.Second)))
					if d := time.Until(at); d > 0 {
						select {
						case <-time.After(d):
						case <-ctx.Done():
							return
						}
					}
				}
				body, header, raw := l.Request(seq)
				p := Post{Seq: seq, Sent: time.Now()}
				for {
					var wait time.Duration
					sent := time.Now()
					if raw {
						p.Status, p.Err = l.postRaw(ctx, body, header, timeout)
					} else {
						p.Status, p.EventID, wait, p.Err = l.post(ctx, client, body, header)
					}
					p.Done = time.Now()
					p.Attempts = append(p.Attempts, Attempt{Sent: sent, Done: p.Done, Status: p.Status})
					retry := p.Status == 0 || p.Status == http.StatusServiceUnavailable || p.Status == http.StatusTooManyRequests
					if !retry || time.Since(p.Sent) > l.RetryFor || ctx.Err() != nil {
						break
					}
					p.Retried = append(p.Retried, p.StatusKey())
					if sleep(ctx, min(max(wait, 200*time.Millisecond), time.Second)) != nil {
						break
					}
				}
				posts[seq] = p
			}
		})
	}
	wg.Wait()
	for i := range posts {
		posts[i].Seq = i // posts never sent keep Status 0 and a zero Sent
	}
	return posts
}

// post sends one request and returns the status, the event id of a 2xx,
// the Retry-After wait and any transport error.
func (l Load) post(ctx context.Context, client *http.Client, body []byte, header map[string]string) (int, string, time.Duration, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.BaseURL+"/v1/events", bytes.NewReader(body))
	if err != nil {
		return 0, "", 0, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+l.APIKey)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", 0, err.Error()
	}
	defer resp.Body.Close()
	var wait time.Duration
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		wait = time.Duration(n) * time.Second
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var ev struct {
		ID string `json:"id"`
	}
	if resp.StatusCode/100 == 2 {
		_ = json.Unmarshal(b, &ev)
	}
	return resp.StatusCode, ev.ID, wait, ""
}

// postRaw writes one HTTP/1.1 request by hand. header may hold a "path"
// entry (default /v1/events).
func (l Load) postRaw(ctx context.Context, body []byte, header map[string]string, timeout time.Duration) (int, string) {
	host := l.BaseURL[len("http://"):]
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return 0, err.Error()
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	path := "/v1/events"
	var b bytes.Buffer
	if p, ok := header["path"]; ok {
		path = p
	}
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n",
		path, host, l.APIKey, len(body))
	for k, v := range header {
		if k != "path" {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	b.WriteString("\r\n")
	b.Write(body)
	if _, err := conn.Write(b.Bytes()); err != nil {
		return 0, err.Error()
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err.Error()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, ""
}

// eventBody is a single event of about 200 bytes carrying seq.
func eventBody(typ string, seq int) []byte {
	return fmt.Appendf(nil, `{"type":%q,"payload":{"seq":%d,"customer":"cus_%06d","amount":4200,"note":"faults suite, at-least-once check"}}`,
		typ, seq, seq%1000000)
}

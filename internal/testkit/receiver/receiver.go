// Package receiver is a webhook receiver on loopback for tests and
// benchmarks: it records every request it gets, verifies Standard Webhooks
// signatures when given a secret, and answers as its Behavior says (a
// status, a delay, a Retry-After), which can change while it runs.
package receiver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/sluice-dev/sluice/internal/testkit/watch"
)

// Request is one request the receiver got.
type Request struct {
	At       time.Time
	ID       string // webhook-id
	Header   http.Header
	Body     []byte
	Verified bool // the signature verified with the receiver's secret
}

// Behavior is how the receiver answers. The zero value answers 200 at once.
type Behavior struct {
	Status     int           // default 200
	Delay      time.Duration // wait before answering (ends early if the client goes away)
	RetryAfter string        // Retry-After header value, if any
	Location   string        // Location header value (a redirect's target), if any
	Body       string
	// Challenge answers a verification challenge (its body the echo a
	// verified endpoint gives) instead of Body, when the request is one.
	Challenge bool
}

// Receiver is a running loopback receiver.
type Receiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	behavior func(n int) Behavior // n counts requests from 1
	wh       *standardwebhooks.Webhook
	requests watch.List[Request]
	notify   chan struct{}
}

// New starts a receiver answering 200; it stops when the test ends if tb is
// given (tb may be nil for benchmarks, which then call Close).
func New(tb interface{ Cleanup(func()) }) *Receiver {
	r := &Receiver{behavior: func(int) Behavior { return Behavior{} }, notify: make(chan struct{}, 1)}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	if tb != nil {
		tb.Cleanup(r.Close)
	}
	return r
}

// URL is where to point an endpoint.
func (r *Receiver) URL() string { return r.srv.URL + "/hook" }

// Close stops the receiver.
func (r *Receiver) Close() {
	r.srv.CloseClientConnections()
	r.srv.Close()
}

// SetSecret makes the receiver verify signatures with secret.
func (r *Receiver) SetSecret(secret string) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return fmt.Errorf("parse signing secret: %w", err)
	}
	r.mu.Lock()
	r.wh = wh
	r.mu.Unlock()
	return nil
}

// Answer sets one behavior for every request from now on.
func (r *Receiver) Answer(b Behavior) { r.AnswerFunc(func(int) Behavior { return b }) }

// AnswerFunc sets the behavior per request number (counting from 1).
func (r *Receiver) AnswerFunc(f func(n int) Behavior) {
	r.mu.Lock()
	r.behavior = f
	r.mu.Unlock()
}

// Requests returns a copy of every request so far.
func (r *Receiver) Requests() []Request { return r.requests.Items() }

// Count is the number of requests so far.
func (r *Receiver) Count() int { return r.requests.Len() }

// Changed is signalled (without blocking) after each request.
func (r *Receiver) Changed() <-chan struct{} { return r.notify }

// Await blocks until cond holds for the requests so far, checking again
// after each new request, and reports whether it did before timeout
// passed. cond is called with the receiver's own list under its lock: it
// must neither keep the list nor call the receiver.
func (r *Receiver) Await(timeout time.Duration, cond func(reqs []Request) bool) bool {
	return r.requests.Await(timeout, cond)
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	rec := Request{At: time.Now(), ID: req.Header.Get("webhook-id"), Header: req.Header.Clone(), Body: body}
	r.mu.Lock()
	wh, behavior := r.wh, r.behavior
	r.mu.Unlock()
	if wh != nil {
		rec.Verified = wh.Verify(body, req.Header) == nil
	}
	b := behavior(r.requests.Add(rec))
	select {
	case r.notify <- struct{}{}:
	default:
	}

	if b.Delay > 0 {
		select {
		case <-time.After(b.Delay):
		case <-req.Context().Done():
			return
		}
	}
	if b.RetryAfter != "" {
		w.Header().Set("Retry-After", b.RetryAfter)
	}
	if b.Location != "" {
		w.Header().Set("Location", b.Location)
	}
	if b.Status == 0 {
		b.Status = http.StatusOK
	}
	w.WriteHeader(b.Status)
	if answer, ok := challenge(body); ok && b.Challenge {
		_, _ = w.Write(answer)
		return
	}
	_, _ = io.WriteString(w, b.Body)
}

// challenge is the answer to a verification challenge, when body is one.
func challenge(body []byte) ([]byte, bool) {
	var ev struct {
		Type string `json:"type"`
		Data struct {
			Challenge string `json:"challenge"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &ev) != nil || ev.Type != "sluice.endpoint.verification" {
		return nil, false
	}
	answer, _ := json.Marshal(map[string]string{"challenge": ev.Data.Challenge})
	return answer, true
}

package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Mode is how one of the receiver's endpoints answers.
type Mode string

// Endpoint behaviours.
const (
	ModeOK     Mode = "ok"     // 200 at once
	ModeHang   Mode = "hang"   // never answers; Sluice's delivery timeout ends it
	ModeReset  Mode = "reset"  // resets the connection (TCP RST) without answering
	ModeStream Mode = "stream" // 200 with a 50 MB body, streamed
	ModeFail   Mode = "fail"   // 500 at once
	ModeGone   Mode = "gone"   // 410 Gone at once: Sluice disables the endpoint
	// ModePicky answers 500 to the events whose webhook-id is Picky (one
	// in pickyEvery) and 200 to the others: those deliveries spend their
	// attempts and go dead.
	ModePicky Mode = "picky"
)

// pickyEvery is how many events in one a ModePicky endpoint refuses.
const pickyEvery = 10

// Picky reports whether a ModePicky endpoint refuses event id.
func Picky(id string) bool {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return h.Sum32()%pickyEvery == 0
}

// streamBytes is how much a ModeStream endpoint sends back.
const streamBytes = 50 << 20

// Receipt is one request the receiver got.
type Receipt struct {
	At       time.Time
	Endpoint string
	ID       string // webhook-id
	Type     string // the body's "type"
	// Signed: the signature verified with the endpoint's secret (only for
	// endpoints given one with SetSecret).
	Signed bool
}

// Receiver is an HTTP server on loopback with one path per endpoint
// (/hook/NAME). It logs every request's webhook-id, with the time, the
// endpoint and the event's type, to a file, and keeps them in memory for
// reconciliation.
type Receiver struct {
	srv   *http.Server
	ln    net.Listener
	modes map[string]Mode

	mu       sync.Mutex
	log      *bufio.Writer
	logFile  *os.File
	receipts []Receipt
	seen     map[string]struct{} // endpoint + " " + webhook-id
	verify   map[string]*standardwebhooks.Webhook
}

// StartReceiver listens on 127.0.0.1 and logs to logPath; modes names the
// endpoints and how each answers.
func StartReceiver(logPath string, modes map[string]Mode) (*Receiver, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create receiver log: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("listen for webhooks: %w", err)
	}
	r := &Receiver{ln: ln, modes: maps.Clone(modes), logFile: f, log: bufio.NewWriterSize(f, 64<<10),
		seen: map[string]struct{}{}, verify: map[string]*standardwebhooks.Webhook{}}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	go r.flushLoop()
	return r, nil
}

// SetMode changes how endpoint name answers from now on.
func (r *Receiver) SetMode(name string, m Mode) {
	r.mu.Lock()
	r.modes[name] = m
	r.mu.Unlock()
}

// SetSecret makes the receiver verify the signature of every request to
// endpoint name with secret (Receipt.Signed).
func (r *Receiver) SetSecret(name, secret string) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return fmt.Errorf("parse signing secret of %s: %w", name, err)
	}
	r.mu.Lock()
	r.verify[name] = wh
	r.mu.Unlock()
	return nil
}

// URL is the address of endpoint name.
func (r *Receiver) URL(name string) string {
	return "http://" + r.ln.Addr().String() + "/hook/" + name
}

func (r *Receiver) flushLoop() {
	for range time.Tick(500 * time.Millisecond) {
		r.mu.Lock()
		if r.log == nil {
			r.mu.Unlock()
			return
		}
		_ = r.log.Flush()
		r.mu.Unlock()
	}
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	name := strings.TrimPrefix(req.URL.Path, "/hook/")
	r.mu.Lock()
	mode, ok := r.modes[name]
	wh := r.verify[name]
	r.mu.Unlock()
	if !ok {
		http.NotFound(w, req)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	rc := Receipt{At: time.Now(), Endpoint: name, ID: req.Header.Get("webhook-id")}
	var ev struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(body, &ev) == nil {
		rc.Type = ev.Type
	}
	if wh != nil {
		rc.Signed = wh.Verify(body, req.Header) == nil
	}
	r.mu.Lock()
	r.receipts = append(r.receipts, rc)
	r.seen[name+" "+rc.ID] = struct{}{}
	if r.log != nil {
		fmt.Fprintf(r.log, "%d %s %s %s\n", rc.At.UnixNano(), rc.Endpoint, rc.ID, rc.Type)
	}
	r.mu.Unlock()

	switch mode {
	case ModeFail:
		w.WriteHeader(http.StatusInternalServerError)
	case ModeGone:
		w.WriteHeader(http.StatusGone)
	case ModePicky:
		if Picky(rc.ID) {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	case ModeHang:
		<-req.Context().Done()
	case ModeReset:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				if tc, ok := conn.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // close with RST
				}
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	case ModeStream:
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		chunk := make([]byte, 32<<10)
		for i := range chunk {
			chunk[i] = 'x'
		}
		for sent := 0; sent < streamBytes; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// Receipts returns every request so far.
func (r *Receiver) Receipts() []Receipt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Receipt(nil), r.receipts...)
}

// Missing counts the (endpoint, id) pairs not received yet.
func (r *Receiver) Missing(endpoints, ids []string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range endpoints {
		for _, id := range ids {
			if _, ok := r.seen[e+" "+id]; !ok {
				n++
			}
		}
	}
	return n
}

// Count is the number of requests so far.
func (r *Receiver) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.receipts)
}

// Close stops the server (hanging requests end) and flushes the log.
func (r *Receiver) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
	_ = r.srv.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.log != nil {
		_ = r.log.Flush()
		_ = r.logFile.Close()
		r.log = nil
	}
}

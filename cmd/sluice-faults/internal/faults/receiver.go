package faults

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Mode is how one of the receiver's endpoints answers.
type Mode string

// Endpoint behaviours.
const (
	ModeOK     Mode = "ok"     // 200 at once
	ModeHang   Mode = "hang"   // never answers; Sluice's delivery timeout ends it
	ModeReset  Mode = "reset"  // resets the connection (TCP RST) without answering
	ModeStream Mode = "stream" // 200 with a 50 MB body, streamed
)

// streamBytes is how much a ModeStream endpoint sends back.
const streamBytes = 50 << 20

// Receipt is one request the receiver got.
type Receipt struct {
	At       time.Time
	Endpoint string
	ID       string // webhook-id
}

// Receiver is an HTTP server on loopback with one path per endpoint
// (/hook/NAME). It logs every request's webhook-id, with the time and the
// endpoint, to a file, and keeps them in memory for reconciliation.
type Receiver struct {
	srv   *http.Server
	ln    net.Listener
	modes map[string]Mode

	mu       sync.Mutex
	log      *bufio.Writer
	logFile  *os.File
	receipts []Receipt
	seen     map[string]struct{} // endpoint + " " + webhook-id
}

// StartReceiver listens on 127.0.0.1 and logs to logPath; modes names the
// endpoints and how each answers.
func StartReceiver(logPath string, modes map[string]Mode) (*Receiver, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Close()
		return nil, err
	}
	r := &Receiver{ln: ln, modes: modes, logFile: f, log: bufio.NewWriterSize(f, 64<<10), seen: map[string]struct{}{}}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	go r.flushLoop()
	return r, nil
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
	mode, ok := r.modes[name]
	if !ok {
		http.NotFound(w, req)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, 1<<20))
	rc := Receipt{At: time.Now(), Endpoint: name, ID: req.Header.Get("webhook-id")}
	r.mu.Lock()
	r.receipts = append(r.receipts, rc)
	r.seen[name+" "+rc.ID] = struct{}{}
	if r.log != nil {
		fmt.Fprintf(r.log, "%d %s %s\n", rc.At.UnixNano(), rc.Endpoint, rc.ID)
	}
	r.mu.Unlock()

	switch mode {
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

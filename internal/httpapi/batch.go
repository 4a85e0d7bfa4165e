package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// Bounds on the memory that large bodies take: batches, and single events
// when SLUICE_MAX_PAYLOAD lets them be large.
const (
	// largeBatchBytes is the body size above which a body is large: it
	// waits for none, but at most maxLargeBatches are read at once.
	largeBatchBytes = 1 << 20
	// DefaultMaxLargeBatches is Config.MaxLargeBatches' default.
	DefaultMaxLargeBatches = 4
	// batchWriteTimeout is how long a client has to take a batch's answer,
	// so that one that never reads it cannot hold a turn and the batch's
	// memory for ever.
	batchWriteTimeout = 30 * time.Second
)

// admitLarge lets a body of at most limit bytes be read, or answers 503
// (and false) before a byte of it is read when maxLargeBatches large ones
// (by Content-Length, or of unknown length where limit allows a large one)
// are being handled already; what names the requests in the answer.
// Batches and large single events share the turns. release ends a turn.
func (a *API) admitLarge(w http.ResponseWriter, r *http.Request, limit int64, what string) (release func(), ok bool) {
	if (r.ContentLength >= 0 && r.ContentLength <= largeBatchBytes) || limit <= largeBatchBytes {
		return func() {}, true
	}
	select {
	case a.limits.batches <- struct{}{}:
		return func() { <-a.limits.batches }, true
	default:
		refuseBody(w, r, &Problem{Type: typeUnavailable, Title: "Service unavailable", Status: http.StatusServiceUnavailable,
			Detail: "too many large " + what + " are being handled right now; retry shortly", RetryAfter: 1})
		return nil, false
	}
}

// refuseBody answers p to a request whose body will not be used, so that
// the client reads the answer rather than a connection reset.
//
// A client that sent "Expect: 100-continue" is waiting for a go-ahead
// before it sends the body: the answer goes out at once, the body is never
// sent, and the connection is closed. Any other client is sending its
// body already; closing the connection with that body unread would reset
// it, and the reset discards the answer the client has not read yet. So
// the answer is sent first and the body is then read and discarded (up
// to maxBatchBody, within the server's read timeout), holding no memory.
func refuseBody(w http.ResponseWriter, r *http.Request, p *Problem) {
	if r.Header.Get("Expect") != "" {
		writeProblem(w, p)
		return
	}
	w.Header().Set("Connection", "close")
	// Go's HTTP/1 server lets a handler read the body after answering
	// only in full-duplex mode (TestRefusedBatchesGetTheirAnswer).
	rc := http.NewResponseController(w)
	_ = rc.EnableFullDuplex()
	writeProblem(w, p)
	_ = rc.Flush()
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxBatchBody))
}

// writeEventList answers {"data": [event, ...]} one event at a time, and
// lets go of each event once written, so that the answer to a large batch
// never holds a second copy of it in memory.
func writeEventList(w http.ResponseWriter, status int, evs []sluice.Event) {
	// The deadline would outlive the request on a keep-alive connection
	// (the server sets none of its own), so it is lifted once written.
	// Recorders in tests do not support it; nothing is lost then.
	rc := http.NewResponseController(w)
	if rc.SetWriteDeadline(time.Now().Add(batchWriteTimeout)) == nil {
		defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if _, err := w.Write([]byte(`{"data":[`)); err != nil {
		return
	}
	for i := range evs {
		b, err := json.Marshal(evs[i])
		evs[i] = sluice.Event{}
		if err != nil {
			return // cannot happen: events are made of JSON
		}
		if i > 0 {
			if _, err := w.Write([]byte{','}); err != nil {
				return
			}
		}
		if _, err := w.Write(b); err != nil {
			return
		}
	}
	_, _ = w.Write([]byte("]}\n"))
}

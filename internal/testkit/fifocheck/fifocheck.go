// Package fifocheck is a receiver for FIFO endpoints (docs/receiving.md,
// "FIFO endpoints and webhook-sequence") that fails at random, and the
// check of what it received: each line in order, each event only after the
// one before it was answered 2xx, one request of a line at a time, and
// webhook-sequence numbers without gaps, the same on every resend of a
// delivery.
//
// Events carry their place in the sender's order in their payload:
// {"line": L, "n": N, "a": A}, where N counts the line's posts and A the
// attempts of post N (a post retried after no answer may have been stored
// twice). Posts of a line are sent one after another, so (N, A) is the
// order in which the line's events were accepted.
package fifocheck

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Answer is how the receiver answers one request.
type Answer string

// Answers.
const (
	OK      Answer = "200"
	Fail    Answer = "500"
	Timeout Answer = "timeout" // no answer until the sender gives up
	Reset   Answer = "reset"   // the connection reset without an answer
)

// Mix is the share of requests answered each way; the rest are OK.
type Mix struct {
	Fail, Timeout, Reset float64
}

// Key is an event's place in its line: post N, attempt A.
type Key struct{ N, A int }

// Receipt is one request the receiver got.
type Receipt struct {
	Endpoint string // the path's last element
	Line     string
	Key      Key
	EventID  string // webhook-id
	Sequence int64  // webhook-sequence; 0 when absent
	Arrived  time.Time
	Ended    time.Time // answered, or the sender went away
	Answer   Answer
}

// Receiver serves /fifo/<endpoint> on loopback.
type Receiver struct {
	srv *http.Server
	ln  net.Listener
	mix Mix

	mu       sync.Mutex
	receipts []Receipt
	changed  chan struct{}
}

// Start starts a receiver answering by mix.
func Start(mix Mix) (*Receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	r := &Receiver{ln: ln, mix: mix, changed: make(chan struct{})}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// URL is endpoint's URL.
func (r *Receiver) URL(endpoint string) string {
	return "http://" + r.ln.Addr().String() + "/fifo/" + endpoint
}

// SetMix changes how requests are answered from now on.
func (r *Receiver) SetMix(m Mix) {
	r.mu.Lock()
	r.mix = m
	r.mu.Unlock()
}

// Close stops the receiver.
func (r *Receiver) Close() { _ = r.srv.Close() }

// Receipts returns every request so far, in order of arrival.
func (r *Receiver) Receipts() []Receipt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.receipts)
}

// Await waits until cond holds for the receipts so far or timeout passes,
// and reports whether it held.
func (r *Receiver) Await(timeout time.Duration, cond func([]Receipt) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ok, changed := cond(r.receipts), r.changed
		r.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

type body struct {
	Data struct {
		Line string `json:"line"`
		N    int    `json:"n"`
		A    int    `json:"a"`
	} `json:"data"`
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	raw, _ := io.ReadAll(req.Body)
	var b body
	_ = json.Unmarshal(raw, &b)
	seq, _ := strconv.ParseInt(req.Header.Get("webhook-sequence"), 10, 64)
	rc := Receipt{
		Endpoint: req.URL.Path[len("/fifo/"):], Line: b.Data.Line, Key: Key{b.Data.N, b.Data.A},
		EventID: req.Header.Get("webhook-id"), Sequence: seq, Arrived: time.Now(),
	}
	r.mu.Lock()
	rc.Answer = r.mix.pick(rand.Float64())
	i := len(r.receipts)
	r.receipts = append(r.receipts, rc)
	r.mu.Unlock()

	end := func() {
		r.mu.Lock()
		r.receipts[i].Ended = time.Now()
		close(r.changed)
		r.changed = make(chan struct{})
		r.mu.Unlock()
	}
	switch rc.Answer {
	case Timeout:
		<-req.Context().Done()
		end()
	case Reset:
		end()
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				if tc, ok := conn.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // RST, not FIN
				}
				_ = conn.Close()
				return
			}
		}
		w.WriteHeader(http.StatusInternalServerError)
	case Fail:
		end()
		w.WriteHeader(http.StatusInternalServerError)
	default:
		end() // before the answer: the sender cannot act on it sooner
		w.WriteHeader(http.StatusOK)
	}
}

func (m Mix) pick(x float64) Answer {
	switch {
	case x < m.Fail:
		return Fail
	case x < m.Fail+m.Timeout:
		return Timeout
	case x < m.Fail+m.Timeout+m.Reset:
		return Reset
	default:
		return OK
	}
}

// Report is what Check found.
type Report struct {
	Lines      int
	Events     int // distinct events received
	Receipts   int
	Delivered  int // events answered 200 at least once
	Duplicates int // requests of an event after its 200
	// OutOfOrder: requests of an event that arrived before an event
	// accepted earlier in its line had been answered 200.
	OutOfOrder []string
	// Overlaps: requests that arrived while another request of the same
	// line was still open.
	Overlaps []string
	// SequenceErrors: a line's first numbers not 1, 2, 3, ... in its order,
	// or a resend with another number than the first request of its event.
	SequenceErrors []string
	// Missing: events of Expected never answered 200.
	Missing []string
}

// Failures is the number of violations found.
func (r Report) Failures() int {
	return len(r.OutOfOrder) + len(r.Overlaps) + len(r.SequenceErrors) + len(r.Missing)
}

func (r Report) String() string {
	return fmt.Sprintf("%d lines, %d events, %d requests, %d delivered, %d duplicates; %d out of order, %d overlapping, %d sequence errors, %d missing",
		r.Lines, r.Events, r.Receipts, r.Delivered, r.Duplicates, len(r.OutOfOrder), len(r.Overlaps), len(r.SequenceErrors), len(r.Missing))
}

// Check checks receipts (in order of arrival) per (endpoint, line), for
// deliveries that never go dead (so no number is skipped) and no replays.
// expected names, per endpoint and line, the keys of the events accepted
// (answered 2xx to their post), which must all have been delivered.
func Check(receipts []Receipt, expected map[[2]string][]Key) Report {
	type lineKey = [2]string
	byLine := map[lineKey][]Receipt{}
	for _, rc := range receipts {
		k := lineKey{rc.Endpoint, rc.Line}
		byLine[k] = append(byLine[k], rc)
	}
	var rep Report
	rep.Receipts = len(receipts)
	for _, lk := range slices.SortedFunc(func(yield func(lineKey) bool) {
		for k := range byLine {
			if !yield(k) {
				return
			}
		}
	}, func(a, b lineKey) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) }) {
		rep.Lines++
		checkLine(lk, byLine[lk], &rep)
	}
	for lk, keys := range expected {
		got := map[Key]bool{}
		for _, rc := range byLine[lk] {
			if rc.Answer == OK {
				got[rc.Key] = true
			}
		}
		for _, k := range keys {
			if !got[k] {
				rep.Missing = append(rep.Missing, fmt.Sprintf("%s/%s: post %d attempt %d", lk[0], lk[1], k.N, k.A))
			}
		}
	}
	return rep
}

func checkLine(lk [2]string, rcs []Receipt, rep *Report) {
	name := lk[0] + "/" + lk[1]
	var keys []Key
	firstOK := map[Key]time.Time{}
	seqOf := map[Key]int64{}
	for _, rc := range rcs {
		if _, seen := seqOf[rc.Key]; !seen {
			keys = append(keys, rc.Key)
			seqOf[rc.Key] = rc.Sequence
		} else if rc.Sequence != seqOf[rc.Key] {
			rep.SequenceErrors = append(rep.SequenceErrors, fmt.Sprintf("%s: post %d resent with sequence %d, first sent with %d",
				name, rc.Key.N, rc.Sequence, seqOf[rc.Key]))
		}
		if rc.Answer == OK && firstOK[rc.Key].IsZero() {
			firstOK[rc.Key] = rc.Ended
		}
	}
	slices.SortFunc(keys, func(a, b Key) int { return cmp.Or(cmp.Compare(a.N, b.N), cmp.Compare(a.A, b.A)) })
	rep.Events += len(keys)
	rep.Delivered += len(firstOK)
	for i, k := range keys {
		if want := int64(i + 1); seqOf[k] != want {
			rep.SequenceErrors = append(rep.SequenceErrors, fmt.Sprintf("%s: post %d has sequence %d, its place in line is %d",
				name, k.N, seqOf[k], want))
		}
	}
	prev := map[Key]Key{} // each key's predecessor in line
	for i := 1; i < len(keys); i++ {
		prev[keys[i]] = keys[i-1]
	}
	for i, rc := range rcs {
		if ok := firstOK[rc.Key]; !ok.IsZero() && ok.Before(rc.Arrived) {
			rep.Duplicates++
		}
		if p, has := prev[rc.Key]; has {
			if done := firstOK[p]; done.IsZero() || done.After(rc.Arrived) {
				rep.OutOfOrder = append(rep.OutOfOrder, fmt.Sprintf("%s: post %d arrived at %s before post %d was delivered",
					name, rc.Key.N, rc.Arrived.Format(time.StampMicro), p.N))
			}
		}
		for _, o := range rcs[:i] {
			if o.Ended.IsZero() || o.Ended.After(rc.Arrived) {
				rep.Overlaps = append(rep.Overlaps, fmt.Sprintf("%s: post %d arrived at %s while post %d (%s) was open",
					name, rc.Key.N, rc.Arrived.Format(time.StampMicro), o.Key.N, o.Answer))
			}
		}
	}
}

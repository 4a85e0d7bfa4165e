package send

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// A destination is where one endpoint's attempts go: its HTTP URL (the
// Sender's own post) or a message broker (Message.Destination). A broker
// kind is one file: a destination that publishes a message and reports
// the broker's answer, and its opener in kinds.
type destination interface {
	// deliver makes one attempt of m; ctx carries the attempt's timeout.
	deliver(ctx context.Context, m Message) Result
}

// An opener makes the destination of a broker URL (with its credentials),
// dialling through dial, which applies the address guard. It connects
// lazily or at once; either way the destination reconnects by itself.
type opener func(rawURL string, dial dialFunc) (destination, error)

// dialFunc dials a broker through the address guard.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// kinds are the broker kinds, by sluice.Destination.Type.
var kinds = map[string]opener{
	sluice.DestinationRedis: openRedis,
	sluice.DestinationNATS:  openNATS,
	sluice.DestinationAMQP:  openAMQP,
}

// Delivers reports whether the send stage delivers to destinations of
// kind (a sluice.Destination.Type).
func Delivers(kind string) bool {
	_, ok := kinds[kind]
	return ok
}

// errBackpressure marks a broker's refusal for now (out of memory, a full
// stream, a blocked connection): the attempt is throttled like a 429 and
// spends nothing.
var errBackpressure = errors.New("back-pressure")

// brokers holds one destination per broker URL, shared by every delivery
// to it: its connections are pooled and reused, never one per attempt.
type brokers struct {
	dial   dialFunc
	mu     sync.Mutex
	m      map[brokerKey]destination
	closed bool // by close: no broker is opened again
}

type brokerKey struct{ kind, url string }

// deliver makes one attempt of m to its broker, opening the broker's
// destination on first use.
func (b *brokers) deliver(ctx context.Context, m Message) Result {
	d, err := b.get(m.Destination.Type, string(m.Destination.FullURL))
	if err != nil {
		return Result{At: time.Now(), Err: err.Error()}
	}
	return d.deliver(ctx, m)
}

func (b *brokers) get(kind, rawURL string) (destination, error) {
	key := brokerKey{kind, rawURL}
	b.mu.Lock()
	defer b.mu.Unlock()
	if d, ok := b.m[key]; ok {
		return d, nil
	}
	if b.closed {
		return nil, errors.New("sender closed")
	}
	open, ok := kinds[kind]
	if !ok {
		return nil, errors.New("unknown destination type " + strconv.Quote(kind))
	}
	d, err := open(rawURL, b.dial)
	if err != nil {
		return nil, err
	}
	b.m[key] = d
	return d, nil
}

// close closes every broker connection, for good.
func (b *brokers) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for k, d := range b.m {
		if c, ok := d.(interface{ close() }); ok {
			c.close()
		}
		delete(b.m, k)
	}
}

// field is one header of a broker message: a webhook-* header by its
// lower-case name.
type field struct{ name, value string }

// brokerFields are the Standard Webhooks headers of m as a broker message
// carries them, signed as an HTTP attempt's are, at ts.
func brokerFields(m Message, ts time.Time) []field {
	f := []field{
		{"webhook-id", m.ID},
		{"webhook-timestamp", strconv.FormatInt(ts.Unix(), 10)},
		{"webhook-signature", Signatures(m.Keys, m.SigningKeys, m.ID, ts.Unix(), m.Body)},
	}
	if m.Sequence > 0 {
		f = append(f, field{"webhook-sequence", strconv.FormatInt(m.Sequence, 10)})
	}
	return f
}

// brokerResult is the result of a publish that started at start and
// ended with err: confirmed when nil, throttled on back-pressure, and
// otherwise failed with the broker's word.
func brokerResult(ctx context.Context, start time.Time, err error) Result {
	res := Result{At: start, Latency: time.Since(start)}
	switch {
	case err == nil:
		res.Confirmed = true
	case errors.Is(context.Cause(ctx), errTimeout):
		res.Err = "timeout: no confirm from the broker"
	default:
		res.Err = brokerErr(err)
		res.Backpressure = errors.Is(err, errBackpressure)
	}
	return res
}

// brokerErr is the broker's error as an attempt records it.
func brokerErr(err error) string {
	var ne *net.OpError
	if errors.As(err, &ne) {
		return describeErr(err)
	}
	msg := err.Error()
	if len(msg) > 200 {
		msg = strings.ToValidUTF8(msg[:200], "") + "..."
	}
	return msg
}

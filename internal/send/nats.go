package send

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsDest publishes to NATS JetStream: a message to the destination's
// subject with the webhook-* headers, delivered once its stream acks it.
// One connection per server URL, which nats.go reconnects with backoff
// (forever) when it drops; while it is down, publishes fail at once.
type natsDest struct {
	conn *nats.Conn
	js   jetstream.JetStream
}

// JetStream's error codes that mean "not now": a stream at its limits
// with discard new (JSStreamStoreFailedF: "maximum messages exceeded",
// "maximum bytes exceeded") and a server out of resources.
const (
	natsStoreFailed          jetstream.ErrorCode = 10077
	natsInsufficientResource jetstream.ErrorCode = 10023
)

// natsDialer dials through the address guard, as nats.go asks (no context).
type natsDialer struct {
	dial    dialFunc
	timeout time.Duration
}

func (d natsDialer) Dial(network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	return d.dial(ctx, network, addr)
}

func openNATS(rawURL string, dial dialFunc) (destination, error) {
	conn, err := nats.Connect(rawURL,
		nats.Name("sluice"),
		nats.SetCustomDialer(natsDialer{dial: dial, timeout: 5 * time.Second}),
		nats.RetryOnFailedConnect(true), // a broker down at first use is reached later, as after a drop
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		// No buffer while reconnecting: a publish then fails at once, an
		// attempt that failed, instead of waiting out the attempt's timeout
		// and reaching the stream later unconfirmed (a duplicate).
		nats.ReconnectBufSize(-1),
		nats.NoCallbacksAfterClientClose(),
	)
	if err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	js, err := jetstream.New(conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("nats jetstream: %w", err)
	}
	return &natsDest{conn: conn, js: js}, nil
}

func (n *natsDest) deliver(ctx context.Context, m Message) Result {
	start := time.Now()
	ts := m.Timestamp
	if ts.IsZero() {
		ts = start
	}
	msg := &nats.Msg{Subject: m.Destination.Subject, Data: m.Body, Header: nats.Header{}}
	for _, f := range brokerFields(m, ts) {
		msg.Header[f.name] = []string{f.value} // as written: NATS header names are case-sensitive
	}
	msg.Header["content-type"] = []string{"application/json"}
	_, err := n.js.PublishMsg(ctx, msg)
	return brokerResult(ctx, start, natsErr(err))
}

// natsErr marks back-pressure in a publish's error and names the broker.
func natsErr(err error) error {
	if err == nil {
		return nil
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		desc := apiErr.Description
		full := apiErr.ErrorCode == natsStoreFailed && strings.Contains(desc, "maximum") && strings.Contains(desc, "exceeded")
		if full || apiErr.ErrorCode == natsInsufficientResource {
			return fmt.Errorf("%w: nats: %s", errBackpressure, desc)
		}
		return fmt.Errorf("nats: %s", desc)
	}
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return errors.New("nats: no stream takes this subject")
	case errors.Is(err, nats.ErrReconnectBufExceeded), errors.Is(err, nats.ErrConnectionClosed):
		return errors.New("nats: not connected to the server (reconnecting)")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return err
	}
	return fmt.Errorf("nats: %w", err)
}

func (n *natsDest) close() { n.conn.Close() }

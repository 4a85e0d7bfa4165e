package send

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// amqpDest publishes to an AMQP 0-9-1 broker (RabbitMQ): a persistent,
// mandatory publish to the destination's exchange with its routing key,
// delivered once the broker confirms it (publisher confirms). A nack, or
// the broker returning the message as unroutable, fails the attempt with
// the broker's words; a blocked connection (connection.blocked: a memory
// or disk alarm) throttles it without publishing. One connection per
// broker URL, dialled again with backoff when it drops, and on it a pool
// of confirm-mode channels, one per publish in flight, reused.
type amqpDest struct {
	url  string
	dial dialFunc

	mu   sync.Mutex
	conn *amqp.Connection
	idle []*amqpChannel // confirm-mode channels on conn, free
	// blocked is closed while conn is blocked, and why is the broker's
	// reason; unblocking makes a new one.
	blocked chan struct{}
	why     string
	// After a failed dial, deliveries until retryAt fail with dialErr; the
	// wait doubles with each failure up to amqpMaxBackoff.
	dialErr error
	retryAt time.Time
	backoff time.Duration
	closed  bool
}

// amqpChannel is one channel in confirm mode with its listeners: one
// publish is in flight on it at a time, so a return or a close it hears
// before that publish's confirm is that publish's.
type amqpChannel struct {
	conn    *amqp.Connection
	ch      *amqp.Channel
	returns chan amqp.Return
	closes  chan *amqp.Error
}

const (
	amqpFirstBackoff = 250 * time.Millisecond
	amqpMaxBackoff   = 2 * time.Second
	amqpDialTimeout  = 5 * time.Second
	// amqpMaxIdle is the most idle channels kept per broker; more are
	// closed. It is above the peak in flight of a few endpoints at the
	// API's largest max_in_flight (100), so that a busy endpoint takes a
	// channel from the pool for each publish instead of opening one.
	amqpMaxIdle = 512
)

func openAMQP(rawURL string, dial dialFunc) (destination, error) {
	if _, err := amqp.ParseURI(rawURL); err != nil {
		return nil, fmt.Errorf("amqp url: %w", err)
	}
	return &amqpDest{url: rawURL, dial: dial}, nil
}

func (a *amqpDest) deliver(ctx context.Context, m Message) Result {
	start := time.Now()
	ts := m.Timestamp
	if ts.IsZero() {
		ts = start
	}
	headers := amqp.Table{}
	for _, f := range brokerFields(m, ts) {
		headers[f.name] = f.value
	}
	pub := amqp.Publishing{
		Headers: headers, ContentType: "application/json", DeliveryMode: amqp.Persistent,
		MessageId: m.ID, Timestamp: ts, Body: m.Body,
	}
	c, blocked, err := a.channel(ctx)
	if err != nil {
		return brokerResult(ctx, start, err)
	}
	d := m.Destination
	confirm, err := c.ch.PublishWithDeferredConfirmWithContext(ctx, d.Exchange, d.RoutingKey, true, false, pub)
	if err != nil {
		a.drop(c)
		return brokerResult(ctx, start, c.err(err))
	}
	select {
	case <-confirm.Done():
	case <-blocked:
		// Blocked while the message was on its way: it may still be
		// confirmed, but the attempt waits no longer. The channel may yet
		// hear of this publish, so it is not reused.
		a.drop(c)
		return brokerResult(ctx, start, a.blockedErr())
	case <-ctx.Done():
		a.drop(c)
		return brokerResult(ctx, start, ctx.Err())
	}
	if !confirm.Acked() {
		// A nack, or the channel or connection closed before the confirm
		// (a missing exchange closes the channel): the broker's word.
		a.drop(c)
		return brokerResult(ctx, start, c.err(errors.New("amqp: the broker refused the message (basic.nack)")))
	}
	select {
	case r := <-c.returns:
		// RabbitMQ returns an unroutable mandatory message before it
		// confirms it.
		a.release(c)
		return brokerResult(ctx, start, fmt.Errorf("amqp: message returned unroutable: %d %s (exchange %q, routing key %q)",
			r.ReplyCode, r.ReplyText, r.Exchange, r.RoutingKey))
	default:
	}
	a.release(c)
	return brokerResult(ctx, start, nil)
}

// err is the error to record for a publish on c that failed with err: the
// reason the broker closed the channel or connection, when it did.
func (c *amqpChannel) err(err error) error {
	select {
	case e, ok := <-c.closes:
		if ok && e != nil {
			return fmt.Errorf("amqp: %s", e.Reason)
		}
	default:
	}
	if ae := (*amqp.Error)(nil); errors.As(err, &ae) {
		return fmt.Errorf("amqp: %s", ae.Reason)
	}
	return err
}

// channel is an idle channel of the broker's connection, or a new one,
// dialling the connection when there is none, and the signal of the
// connection becoming blocked. A blocked connection is back-pressure.
func (a *amqpDest) channel(ctx context.Context) (*amqpChannel, <-chan struct{}, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, nil, errors.New("amqp: sender closed")
	}
	if a.conn != nil && a.conn.IsClosed() {
		a.conn, a.idle = nil, nil
	}
	if a.conn == nil {
		if err := a.connect(ctx); err != nil {
			return nil, nil, err
		}
	}
	if isClosed(a.blocked) {
		return nil, nil, a.blockedErrLocked()
	}
	for len(a.idle) > 0 {
		c := a.idle[len(a.idle)-1]
		a.idle = a.idle[:len(a.idle)-1]
		if !c.ch.IsClosed() {
			return c, a.blocked, nil
		}
	}
	ch, err := a.conn.Channel()
	if err != nil {
		return nil, nil, fmt.Errorf("amqp: open channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, nil, fmt.Errorf("amqp: confirm mode: %w", err)
	}
	c := &amqpChannel{conn: a.conn, ch: ch,
		returns: ch.NotifyReturn(make(chan amqp.Return, 1)),
		closes:  ch.NotifyClose(make(chan *amqp.Error, 1)),
	}
	return c, a.blocked, nil
}

// connect dials the broker, unless the last dial failed less than the
// backoff ago; a.mu is held.
func (a *amqpDest) connect(ctx context.Context) error {
	if time.Now().Before(a.retryAt) {
		return a.dialErr
	}
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName("sluice")
	conn, err := amqp.DialConfig(a.url, amqp.Config{
		Properties: props,
		Dial: func(network, addr string) (net.Conn, error) {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), amqpDialTimeout)
			defer cancel()
			c, err := a.dial(dctx, network, addr)
			if err != nil {
				return nil, err
			}
			// Bounds the TLS and AMQP handshakes; cleared once open.
			if err := c.SetDeadline(time.Now().Add(amqpDialTimeout)); err != nil {
				_ = c.Close()
				return nil, fmt.Errorf("amqp: handshake deadline: %w", err)
			}
			return c, nil
		},
	})
	if err != nil {
		a.backoff = min(max(2*a.backoff, amqpFirstBackoff), amqpMaxBackoff)
		a.retryAt = time.Now().Add(a.backoff)
		a.dialErr = amqpDialErr(err)
		return a.dialErr
	}
	a.conn, a.backoff, a.retryAt, a.dialErr = conn, 0, time.Time{}, nil
	a.blocked, a.why = make(chan struct{}), ""
	go a.watchBlocked(conn, conn.NotifyBlocked(make(chan amqp.Blocking, 1)))
	return nil
}

// amqpDialErr is a failed dial's error as an attempt records it: the
// broker's refusal (a wrong password, a missing vhost) in its words.
func amqpDialErr(err error) error {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return fmt.Errorf("amqp: %s", ae.Reason)
	}
	var ne *net.OpError
	if errors.As(err, &ne) {
		return err // described as any connection's (brokerErr)
	}
	return fmt.Errorf("amqp: %w", err)
}

// watchBlocked follows connection.blocked and connection.unblocked on
// conn until it closes.
func (a *amqpDest) watchBlocked(conn *amqp.Connection, notes <-chan amqp.Blocking) {
	for b := range notes {
		a.mu.Lock()
		if a.conn == conn {
			switch {
			case b.Active && !isClosed(a.blocked):
				a.why = b.Reason
				close(a.blocked)
			case !b.Active && isClosed(a.blocked):
				a.blocked, a.why = make(chan struct{}), ""
			}
		}
		a.mu.Unlock()
	}
}

func (a *amqpDest) blockedErr() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.blockedErrLocked()
}

func (a *amqpDest) blockedErrLocked() error {
	return fmt.Errorf("%w: amqp: connection blocked by the broker (%s)", errBackpressure, a.why)
}

// release returns c to the idle pool, or closes it when the pool is full
// or c belongs to an old connection.
func (a *amqpDest) release(c *amqpChannel) {
	a.mu.Lock()
	if !a.closed && c.conn == a.conn && len(a.idle) < amqpMaxIdle && !c.ch.IsClosed() {
		a.idle = append(a.idle, c)
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	a.drop(c)
}

// drop closes c, which is not reused. Closing waits for the broker's
// answer, which a blocked connection does not give until it is
// unblocked or closed, so it does not hold up the attempt.
func (a *amqpDest) drop(c *amqpChannel) {
	if !c.ch.IsClosed() {
		go func() { _ = c.ch.Close() }()
	}
}

// close closes the connection, waiting at most a second for the broker.
func (a *amqpDest) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	if a.conn != nil {
		_ = a.conn.CloseDeadline(time.Now().Add(time.Second))
		a.conn, a.idle = nil, nil
	}
}

// isClosed reports whether ch is closed; a nil ch is not.
func isClosed(ch chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

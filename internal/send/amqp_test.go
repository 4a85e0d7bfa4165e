package send_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/brokertest"
)

// amqpQueue declares an exchange of kind (direct or fanout) bound to a
// queue of the same name on the test's own connection, and returns the
// channel to read it.
func amqpQueue(t *testing.T, conn *amqp.Connection, name string) *amqp.Channel {
	t.Helper()
	ch, err := conn.Channel()
	require.NoError(t, err)
	t.Cleanup(func() { _ = ch.Close() })
	require.NoError(t, ch.ExchangeDeclare(name, "direct", true, false, false, false, nil))
	_, err = ch.QueueDeclare(name, true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind(name, "key", name, false, nil))
	return ch
}

// connections counts the broker's client connections other than the
// test's own one.
func connections(t *testing.T, b *brokertest.Broker) int {
	t.Helper()
	out := strings.TrimSpace(b.Ctl(t, "-q", "list_connections", "client_properties"))
	return strings.Count(out, `"sluice"`)
}

func TestAMQPDestination(t *testing.T) {
	t.Parallel()
	b := brokertest.RabbitMQ(t)
	conn, err := amqp.Dial(b.URL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ctx := t.Context()

	t.Run("confirmed, signed, one connection", func(t *testing.T) {
		ch := amqpQueue(t, conn, "hooks")
		s := setupBroker(t, sluice.Destination{Type: sluice.DestinationAMQP, Exchange: "hooks", RoutingKey: "key", FullURL: []byte(b.URL)})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 5 {
					res := s.sender.Send(ctx, s.msg)
					require.True(t, res.Delivered(), res.Err)
					require.Zero(t, res.StatusCode)
				}
			})
		}
		wg.Wait()
		q, err := ch.QueueDeclarePassive("hooks", true, false, false, false, nil)
		require.NoError(t, err)
		require.Equal(t, 20, q.Messages, "each confirmed publish is in the queue")
		d, ok, err := ch.Get("hooks", true)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, s.msg.Body, d.Body)
		require.Equal(t, "application/json", d.ContentType)
		require.Equal(t, amqp.Persistent, d.DeliveryMode)
		fields := map[string]string{}
		for k, v := range d.Headers {
			fields[k] = v.(string)
		}
		require.Equal(t, "msg_1", fields["webhook-id"])
		require.Equal(t, "7", fields["webhook-sequence"])
		verify(t, s.secret, d.Body, fields)
		require.Equal(t, 1, connections(t, b), "twenty publishes, four at a time, share one connection")
		s.sender.Close()
		require.Zero(t, connections(t, b), "Close closes it")
	})

	t.Run("unroutable is returned, a failure", func(t *testing.T) {
		amqpQueue(t, conn, "bound")
		s := setupBroker(t, sluice.Destination{Type: sluice.DestinationAMQP, Exchange: "bound", RoutingKey: "nobody", FullURL: []byte(b.URL)})
		for range 2 { // the channel stays usable after a return
			res := s.sender.Send(ctx, s.msg)
			require.False(t, res.Delivered())
			require.False(t, res.Throttled())
			require.Contains(t, res.Err, "312 NO_ROUTE")
		}
	})

	t.Run("the default exchange routes to a queue by name", func(t *testing.T) {
		amqpQueue(t, conn, "direct-q")
		s := setupBroker(t, sluice.Destination{Type: sluice.DestinationAMQP, RoutingKey: "direct-q", FullURL: []byte(b.URL)})
		res := s.sender.Send(ctx, s.msg)
		require.True(t, res.Delivered(), res.Err)
	})

	t.Run("a missing exchange is the broker's error", func(t *testing.T) {
		amqpQueue(t, conn, "there")
		s := setupBroker(t, sluice.Destination{Type: sluice.DestinationAMQP, Exchange: "missing", RoutingKey: "key", FullURL: []byte(b.URL)})
		res := s.sender.Send(ctx, s.msg)
		require.False(t, res.Delivered())
		require.False(t, res.Throttled())
		require.Contains(t, res.Err, "NOT_FOUND - no exchange 'missing'")
		// The closed channel is not reused: the next publish, elsewhere, is confirmed.
		s.msg.Destination.Exchange = "there"
		res = s.sender.Send(ctx, s.msg)
		require.True(t, res.Delivered(), res.Err)
	})

	t.Run("a wrong password is refused", func(t *testing.T) {
		s := setupBroker(t, sluice.Destination{Type: sluice.DestinationAMQP, Exchange: "hooks", RoutingKey: "key",
			FullURL: []byte(strings.Replace(b.URL, "guest:guest@", "guest:nope@", 1))})
		res := s.sender.Send(ctx, s.msg)
		require.False(t, res.Delivered())
		require.Contains(t, res.Err, "username or password not allowed")
	})

	t.Run("guard refuses loopback unless private targets are allowed", func(t *testing.T) {
		s := send.New(send.Config{Timeout: 5 * time.Second})
		t.Cleanup(s.Close)
		m := setupBroker(t, sluice.Destination{Type: sluice.DestinationAMQP, Exchange: "hooks", RoutingKey: "key", FullURL: []byte(b.URL)}).msg
		res := s.Send(ctx, m)
		require.False(t, res.Delivered())
		require.Contains(t, res.Err, "not allowed")
	})

	t.Run("a nack is a failure", func(t *testing.T) {
		ch, err := conn.Channel()
		require.NoError(t, err)
		t.Cleanup(func() { _ = ch.Close() })
		_, err = ch.QueueDeclare("tiny", true, false, false, false, amqp.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"})
		require.NoError(t, err)
		s := setupBroker(t, sluice.Destination{Type: sluice.DestinationAMQP, RoutingKey: "tiny", FullURL: []byte(b.URL)})
		require.True(t, s.sender.Send(ctx, s.msg).Delivered())
		res := s.sender.Send(ctx, s.msg) // the queue is full and rejects it
		require.False(t, res.Delivered())
		require.False(t, res.Throttled())
		require.Contains(t, res.Err, "basic.nack")
	})

	// Then: the memory alarm blocks every publishing connection of the node.
	t.Run("a blocked connection throttles, then delivers", func(t *testing.T) {
		ch := amqpQueue(t, conn, "alarmed")
		s := setupBroker(t, sluice.Destination{Type: sluice.DestinationAMQP, Exchange: "alarmed", RoutingKey: "key", FullURL: []byte(b.URL)})
		require.True(t, s.sender.Send(ctx, s.msg).Delivered(), "connected before the alarm")
		b.Ctl(t, "set_vm_memory_high_watermark", "0.0000001")
		res := s.sender.Send(ctx, s.msg)
		require.True(t, res.Throttled(), res.Err)
		require.False(t, res.Delivered())
		require.Contains(t, res.Err, "blocked")
		b.Ctl(t, "set_vm_memory_high_watermark", "0.4")
		require.Eventually(t, func() bool { return s.sender.Send(ctx, s.msg).Delivered() }, 30*time.Second, 100*time.Millisecond,
			"delivered once the alarm clears")
		q, err := ch.QueueDeclarePassive("alarmed", true, false, false, false, nil)
		require.NoError(t, err)
		require.GreaterOrEqual(t, q.Messages, 2)
	})

	// Last: the broker goes away. Attempts fail, not throttled: the one
	// that finds the connection gone, and then one whose dial is refused.
	t.Run("broker down", func(t *testing.T) {
		s := setupBroker(t, sluice.Destination{Type: sluice.DestinationAMQP, RoutingKey: "direct-q", FullURL: []byte(b.URL)})
		require.True(t, s.sender.Send(ctx, s.msg).Delivered())
		b.KillAndWait(t)
		res := s.sender.Send(ctx, s.msg)
		require.False(t, res.Delivered())
		require.False(t, res.Throttled())
		require.NotEmpty(t, res.Err)
		// The killed connection may answer one more send with a reset before
		// its close is seen; within a send or two the dial is refused.
		refused := false
		for range 3 {
			res = s.sender.Send(ctx, s.msg)
			require.False(t, res.Delivered())
			require.False(t, res.Throttled())
			if refused = strings.Contains(res.Err, "connection refused"); refused {
				break
			}
		}
		require.True(t, refused, "a send after the broker went away dials and is refused: %s", res.Err)
	})
}

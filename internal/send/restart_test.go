package send_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/brokertest"
)

// restartKind is one broker kind for TestBrokerRestart: a broker
// configured to keep what it acknowledged, a destination on it, and how
// many messages a consumer finds there.
type restartKind struct {
	name  string
	start func(t *testing.T) (*brokertest.Broker, sluice.Destination)
	count func(t *testing.T, b *brokertest.Broker) int
}

var restartKinds = []restartKind{
	{
		name: "redis",
		start: func(t *testing.T) (*brokertest.Broker, sluice.Destination) {
			// Every acknowledged XADD in the append-only file before the answer.
			b := brokertest.Redis(t, "--appendonly", "yes", "--appendfsync", "always")
			return b, sluice.Destination{Type: sluice.DestinationRedis, Stream: "hooks", FullURL: []byte(b.URL)}
		},
		count: func(t *testing.T, b *brokertest.Broker) int {
			rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(b.Port), Protocol: 2, DisableIdentity: true})
			defer rdb.Close()
			n, err := rdb.XLen(t.Context(), "hooks").Result()
			require.NoError(t, err)
			return int(n)
		},
	},
	{
		name: "nats",
		start: func(t *testing.T) (*brokertest.Broker, sluice.Destination) {
			b := brokertest.NATS(t)
			nc, err := nats.Connect(b.URL)
			require.NoError(t, err)
			defer nc.Close()
			js, err := jetstream.New(nc)
			require.NoError(t, err)
			_, err = js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "HOOKS", Subjects: []string{"hooks.>"}, Storage: jetstream.FileStorage})
			require.NoError(t, err)
			return b, sluice.Destination{Type: sluice.DestinationNATS, Subject: "hooks.orders", FullURL: []byte(b.URL)}
		},
		count: func(t *testing.T, b *brokertest.Broker) int {
			nc, err := nats.Connect(b.URL)
			require.NoError(t, err)
			defer nc.Close()
			js, err := jetstream.New(nc)
			require.NoError(t, err)
			s, err := js.Stream(t.Context(), "HOOKS")
			require.NoError(t, err)
			info, err := s.Info(t.Context())
			require.NoError(t, err)
			return int(info.State.Msgs)
		},
	},
	{
		name: "amqp",
		start: func(t *testing.T) (*brokertest.Broker, sluice.Destination) {
			b := brokertest.RabbitMQ(t)
			conn, err := amqp.Dial(b.URL)
			require.NoError(t, err)
			defer conn.Close()
			ch, err := conn.Channel()
			require.NoError(t, err)
			_, err = ch.QueueDeclare("hooks", true, false, false, false, nil) // durable
			require.NoError(t, err)
			return b, sluice.Destination{Type: sluice.DestinationAMQP, RoutingKey: "hooks", FullURL: []byte(b.URL)}
		},
		count: func(t *testing.T, b *brokertest.Broker) int {
			conn, err := amqp.Dial(b.URL)
			require.NoError(t, err)
			defer conn.Close()
			ch, err := conn.Channel()
			require.NoError(t, err)
			q, err := ch.QueueDeclarePassive("hooks", true, false, false, false, nil)
			require.NoError(t, err)
			return q.Messages
		},
	},
}

// TestBrokerRestart kills each broker with SIGKILL and starts it again on
// the same port and data: while it is down a send fails (an attempt
// spent, not throttled), and once it is back the same sender reconnects
// by itself and delivers; what the broker acknowledged before the kill
// is still there.
func TestBrokerRestart(t *testing.T) {
	t.Parallel()
	for _, k := range restartKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			b, d := k.start(t)
			s := setupBroker(t, d)
			ctx := t.Context()
			res := s.sender.Send(ctx, s.msg)
			require.True(t, res.Delivered(), res.Err)

			b.KillAndWait(t)
			for range 3 {
				res := s.sender.Send(ctx, s.msg)
				require.False(t, res.Delivered(), "delivered to a broker that is down")
				require.False(t, res.Throttled(), "a broker down is a failure, not back-pressure: %s", res.Err)
				require.NotEmpty(t, res.Err)
				t.Logf("%s down: %s", k.name, res.Err)
			}

			b.Restart(t)
			back := time.Now()
			require.Eventually(t, func() bool {
				return s.sender.Send(ctx, s.msg).Delivered()
			}, 60*time.Second, 50*time.Millisecond, "the sender reconnects to the restarted broker")
			t.Logf("%s: delivered again %s after the broker was back", k.name, time.Since(back).Round(time.Millisecond))
			require.GreaterOrEqual(t, k.count(t, b), 2, "the message acknowledged before the kill survives the restart")
		})
	}
}

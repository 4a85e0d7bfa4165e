package send_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/brokertest"
)

// brokerSetup is a sender allowed to reach loopback brokers, a secret and
// a message signed with it.
type brokerSetup struct {
	sender *send.Sender
	secret string
	msg    send.Message
}

func setupBroker(t *testing.T, d sluice.Destination) brokerSetup {
	t.Helper()
	secret := send.NewSecret()
	key, err := send.Key(secret)
	require.NoError(t, err)
	s := send.New(send.Config{AllowPrivate: true, Timeout: 5 * time.Second})
	t.Cleanup(s.Close)
	return brokerSetup{sender: s, secret: secret, msg: send.Message{
		ID: "msg_1", Body: []byte(`{"id":"msg_1","type":"order.created","data":{"n":1}}`),
		Keys: [][]byte{key}, Sequence: 7, Destination: &d,
	}}
}

// verify checks fields against the secret as a consumer would: the
// Standard Webhooks library, given the body and the webhook-* headers.
func verify(t *testing.T, secret string, body []byte, fields map[string]string) {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	h := http.Header{}
	for k, v := range fields {
		h.Set(k, v)
	}
	require.NoError(t, wh.Verify(body, h))
}

func TestRedisDestination(t *testing.T) {
	t.Parallel()
	b := brokertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(b.Port), Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()

	t.Run("delivered, signed, one connection", func(t *testing.T) {
		s := setupBroker(t, sluice.Destination{Type: sluice.DestinationRedis, Stream: "hooks", FullURL: []byte(b.URL)})
		for range 20 {
			res := s.sender.Send(ctx, s.msg)
			require.True(t, res.Delivered(), res.Err)
			require.Zero(t, res.StatusCode)
		}
		entries, err := rdb.XRange(ctx, "hooks", "-", "+").Result()
		require.NoError(t, err)
		require.Len(t, entries, 20)
		fields := map[string]string{}
		for k, v := range entries[0].Values {
			fields[k] = v.(string)
		}
		require.Equal(t, string(s.msg.Body), fields["body"])
		require.Equal(t, "msg_1", fields["webhook-id"])
		require.Equal(t, "7", fields["webhook-sequence"])
		verify(t, s.secret, []byte(fields["body"]), fields)
		// Twenty sends, one after another, share one pooled connection
		// (the other client is this test's).
		clients, err := rdb.ClientList(ctx).Result()
		require.NoError(t, err)
		require.Equal(t, 2, strings.Count(clients, "\n"), clients)
	})

	t.Run("max_len trims about that many", func(t *testing.T) {
		s := setupBroker(t, sluice.Destination{Type: sluice.DestinationRedis, Stream: "trimmed", MaxLen: 10, FullURL: []byte(b.URL)})
		for range 500 {
			require.True(t, s.sender.Send(ctx, s.msg).Delivered())
		}
		n, err := rdb.XLen(ctx, "trimmed").Result()
		require.NoError(t, err)
		require.Less(t, n, int64(500)) // MAXLEN ~ trims whole macro nodes: about max_len, never exactly
	})

	t.Run("broker error recorded", func(t *testing.T) {
		require.NoError(t, rdb.Set(ctx, "not-a-stream", "x", 0).Err())
		s := setupBroker(t, sluice.Destination{Type: sluice.DestinationRedis, Stream: "not-a-stream", FullURL: []byte(b.URL)})
		res := s.sender.Send(ctx, s.msg)
		require.False(t, res.Delivered())
		require.False(t, res.Throttled())
		require.Contains(t, res.Err, "WRONGTYPE")
	})

	t.Run("guard refuses loopback unless private targets are allowed", func(t *testing.T) {
		s := send.New(send.Config{Timeout: 5 * time.Second})
		t.Cleanup(s.Close)
		m := setupBroker(t, sluice.Destination{Type: sluice.DestinationRedis, Stream: "hooks", FullURL: []byte(b.URL)}).msg
		res := s.Send(ctx, m)
		require.False(t, res.Delivered())
		require.Contains(t, res.Err, "not allowed")
	})
}

// An endpoint's batch at the API's largest max_in_flight is sent at once:
// with Redis holding every write, all its XADDs are in flight, each on a
// connection of its own, none waiting for one.
func TestRedisFullBatchAtOnce(t *testing.T) {
	t.Parallel()
	const inFlight = 100 // the API's largest max_in_flight
	b := brokertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(b.Port), Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	s := setupBroker(t, sluice.Destination{Type: sluice.DestinationRedis, Stream: "batch", FullURL: []byte(b.URL)})
	s.msg.Timeout = time.Minute

	require.NoError(t, rdb.Do(ctx, "CLIENT", "PAUSE", "60000", "WRITE").Err())
	t.Cleanup(func() { _ = rdb.Do(context.Background(), "CLIENT", "UNPAUSE").Err() })
	var wg sync.WaitGroup
	results := make([]send.Result, inFlight)
	for i := range inFlight {
		wg.Go(func() { results[i] = s.sender.Send(ctx, s.msg) })
	}
	require.Eventually(t, func() bool {
		clients, err := rdb.ClientList(ctx).Result()
		return err == nil && strings.Count(clients, "\n") == inFlight+1 // and this test's
	}, 30*time.Second, 10*time.Millisecond, "each XADD of the batch on a connection of its own")
	require.NoError(t, rdb.Do(ctx, "CLIENT", "UNPAUSE").Err())
	wg.Wait()
	for _, res := range results {
		require.True(t, res.Delivered(), res.Err)
	}
	n, err := rdb.XLen(ctx, "batch").Result()
	require.NoError(t, err)
	require.Equal(t, int64(inFlight), n)
}

func TestRedisOutOfMemoryThrottles(t *testing.T) {
	t.Parallel()
	b := brokertest.Redis(t, "--maxmemory", "1", "--maxmemory-policy", "noeviction")
	s := setupBroker(t, sluice.Destination{Type: sluice.DestinationRedis, Stream: "hooks", FullURL: []byte(b.URL)})
	res := s.sender.Send(t.Context(), s.msg)
	require.True(t, res.Throttled(), res.Err)
	require.False(t, res.Delivered())
	require.Contains(t, res.Err, "OOM")
}

func TestRedisPassword(t *testing.T) {
	t.Parallel()
	b := brokertest.Redis(t, "--requirepass", "s3cret")
	ctx := t.Context()
	wrong := setupBroker(t, sluice.Destination{Type: sluice.DestinationRedis, Stream: "hooks",
		FullURL: []byte(strings.Replace(b.URL, "redis://", "redis://:nope@", 1))})
	res := wrong.sender.Send(ctx, wrong.msg)
	require.False(t, res.Delivered())
	require.Contains(t, res.Err, "WRONGPASS")
	right := setupBroker(t, sluice.Destination{Type: sluice.DestinationRedis, Stream: "hooks",
		FullURL: []byte(strings.Replace(b.URL, "redis://", "redis://:s3cret@", 1))})
	res = right.sender.Send(ctx, right.msg)
	require.True(t, res.Delivered(), res.Err)
}

func TestNATSDestination(t *testing.T) {
	t.Parallel()
	b := brokertest.NATS(t)
	ctx := t.Context()
	nc, err := nats.Connect(b.URL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "HOOKS", Subjects: []string{"hooks.>"}})
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "FULL", Subjects: []string{"full"}, MaxMsgs: 1, Discard: jetstream.DiscardNew})
	require.NoError(t, err)

	t.Run("delivered on the stream's ack, signed", func(t *testing.T) {
		s := setupBroker(t, sluice.Destination{Type: sluice.DestinationNATS, Subject: "hooks.orders", FullURL: []byte(b.URL)})
		res := s.sender.Send(ctx, s.msg)
		require.True(t, res.Delivered(), res.Err)
		stream, err := js.Stream(ctx, "HOOKS")
		require.NoError(t, err)
		got, err := stream.GetLastMsgForSubject(ctx, "hooks.orders")
		require.NoError(t, err)
		require.Equal(t, s.msg.Body, got.Data)
		fields := map[string]string{}
		for k, v := range got.Header {
			fields[k] = v[0]
		}
		require.Equal(t, "msg_1", fields["webhook-id"])
		verify(t, s.secret, got.Data, fields)
	})

	t.Run("a full stream throttles", func(t *testing.T) {
		s := setupBroker(t, sluice.Destination{Type: sluice.DestinationNATS, Subject: "full", FullURL: []byte(b.URL)})
		require.True(t, s.sender.Send(ctx, s.msg).Delivered())
		res := s.sender.Send(ctx, s.msg)
		require.True(t, res.Throttled(), res.Err)
		require.Contains(t, res.Err, "maximum messages")
	})

	t.Run("no stream is a failure", func(t *testing.T) {
		s := setupBroker(t, sluice.Destination{Type: sluice.DestinationNATS, Subject: "nowhere", FullURL: []byte(b.URL)})
		s.msg.Timeout = 2 * time.Second
		res := s.sender.Send(ctx, s.msg)
		require.False(t, res.Delivered())
		require.False(t, res.Throttled())
		require.Contains(t, res.Err, "no stream")
	})
}

func TestBrokerDownIsAFailure(t *testing.T) {
	t.Parallel()
	b := brokertest.Redis(t)
	s := setupBroker(t, sluice.Destination{Type: sluice.DestinationRedis, Stream: "hooks", FullURL: []byte(b.URL)})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.True(t, s.sender.Send(ctx, s.msg).Delivered())
	b.KillAndWait(t)
	res := s.sender.Send(ctx, s.msg)
	require.False(t, res.Delivered())
	require.NotEmpty(t, res.Err)
}

package send

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/brokertest"
)

// An endpoint at the API's largest max_in_flight publishes its batches on
// the channels of the first: every channel goes back to the pool, and the
// next batch opens none.
func TestAMQPChannelsKeptForAFullBatch(t *testing.T) {
	t.Parallel()
	const inFlight = 100 // the API's largest max_in_flight
	b := brokertest.RabbitMQ(t)
	ch := b.Channel(t)
	_, err := ch.QueueDeclare("batch", true, false, false, false, nil)
	require.NoError(t, err)

	s := New(Config{AllowPrivate: true, Timeout: 20 * time.Second})
	t.Cleanup(s.Close)
	d, err := s.brokers.get(sluice.DestinationAMQP, b.URL)
	require.NoError(t, err)
	a := d.(*amqpDest)
	ctx := t.Context()

	// A batch's publishes all in flight at once: as many channels open.
	taken := make([]*amqpChannel, inFlight)
	for i := range taken {
		taken[i], _, err = a.channel(ctx)
		require.NoError(t, err)
	}
	for _, c := range taken {
		a.release(c)
	}
	a.mu.Lock()
	pool := map[*amqpChannel]bool{}
	for _, c := range a.idle {
		pool[c] = true
	}
	a.mu.Unlock()
	require.Equal(t, inFlight, len(pool), "every channel of a full batch is kept")

	dest := sluice.Destination{Type: sluice.DestinationAMQP, RoutingKey: "batch", FullURL: []byte(b.URL)}
	var wg sync.WaitGroup
	for i := range inFlight {
		wg.Go(func() {
			res := s.Send(ctx, Message{ID: "msg_" + strconv.Itoa(i), Body: []byte(`{}`), Destination: &dest})
			require.True(t, res.Delivered(), res.Err)
		})
	}
	wg.Wait()
	a.mu.Lock()
	after := append([]*amqpChannel(nil), a.idle...)
	a.mu.Unlock()
	require.Equal(t, inFlight, len(after))
	for _, c := range after {
		require.True(t, pool[c], "a publish opened a channel instead of taking one from the pool")
	}
	q, err := ch.QueueDeclarePassive("batch", true, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, inFlight, q.Messages)
}

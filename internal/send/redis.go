package send

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisDest publishes to Redis Streams: XADD to the destination's
// stream, with fields body and each webhook-* header, trimmed to about
// max_len entries when it is set (MAXLEN ~). go-redis keeps a pool of
// connections and redials one that broke.
type redisDest struct{ client *redis.Client }

// redisPoolSize is the least connections a broker's pool may open: the
// API's largest max_in_flight, so that one endpoint's batch is sent at
// once. They are opened as needed and closed when idle.
const redisPoolSize = 100

func openRedis(rawURL string, dial dialFunc) (destination, error) {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", err)
	}
	opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) { return dial(ctx, network, addr) }
	opts.MaxRetries = 1
	opts.MinRetryBackoff, opts.MaxRetryBackoff = 100*time.Millisecond, 2*time.Second
	opts.DialerRetries = 1            // a refused dial fails the attempt; the retry schedule tries again
	opts.ContextTimeoutEnabled = true // the attempt's timeout bounds each command
	opts.DisableIdentity = true       // no CLIENT SETINFO: nothing a plain server may refuse
	opts.Protocol = 2
	// One connection per command in flight: go-redis's default (10 per
	// CPU) made an endpoint at its max_in_flight wait for a connection.
	opts.PoolSize = max(opts.PoolSize, redisPoolSize)
	return &redisDest{client: redis.NewClient(opts)}, nil
}

func (r *redisDest) deliver(ctx context.Context, m Message) Result {
	start := time.Now()
	ts := m.Timestamp
	if ts.IsZero() {
		ts = start
	}
	fields := brokerFields(m, ts)
	values := make([]any, 0, 2+2*len(fields))
	values = append(values, "body", m.Body)
	for _, f := range fields {
		values = append(values, f.name, f.value)
	}
	d := m.Destination
	args := &redis.XAddArgs{Stream: d.Stream, Values: values}
	if d.MaxLen > 0 {
		args.MaxLen, args.Approx = d.MaxLen, true
	}
	err := r.client.XAdd(ctx, args).Err()
	if err != nil && strings.HasPrefix(err.Error(), "OOM ") {
		err = fmt.Errorf("%w: redis: %s", errBackpressure, err.Error())
	} else if err != nil {
		var re redis.Error
		if errors.As(err, &re) {
			err = fmt.Errorf("redis: %w", err)
		}
	}
	return brokerResult(ctx, start, err)
}

func (r *redisDest) close() { _ = r.client.Close() }

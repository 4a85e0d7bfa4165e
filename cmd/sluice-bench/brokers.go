package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/internal/testkit/brokertest"
)

// The brokers scenario: deliveries/s to one destination of each broker
// kind against a floor that only publishes the same messages with the
// same confirms, and Sluice's CPU per delivery beside an HTTP endpoint's.

const brokersMaxInFlight = 100 // the API maximum, as e2e-1's

// brokersWarm are the events each endpoint delivers before it is timed:
// as many as it has in flight, so that its connections and channels are
// open, as the floor's are before it starts.
const brokersWarm = brokersMaxInFlight

var brokersScenario = Scenario{
	Name:    "brokers",
	Title:   "Delivery from a backlog, 1 endpoint of each broker kind (Redis Streams, NATS JetStream, RabbitMQ) and 1 HTTP endpoint",
	Workers: 1,
	What: "A redis-server, a nats-server (JetStream, file storage) and a rabbitmq-server started by the benchmark on " +
		"loopback (internal/testkit/brokertest), Sluice as serve --api --dashboard beside one serve --worker. For each " +
		"kind in turn, and for one loopback HTTP receiver: one endpoint (max_in_flight 100), warmed with 100 events " +
		"delivered; then the worker is stopped (SIGSTOP), the events are posted through /v1/events/batch (1000 per " +
		"request, 4 clients), all matching the endpoint, and once all are stored the worker is continued (SIGCONT). " +
		"Deliveries/s = (events − 1) ÷ (the broker holding the first of them → the broker holding all of them: XLEN, the " +
		"stream's message count, the durable queue's message count, polled every 5 ms; for HTTP, the first and last " +
		"requests received): the rate of a running worker, as the floor's is of a running publisher; the worker's " +
		"wake-up (worker continued → first delivery: fetching the dispatch job, the first claim) is its own row. Sluice " +
		"CPU per delivery = Sluice's processes' CPU from the worker continued to the last delivery ÷ events, Postgres's " +
		"likewise; cores busy = the whole " +
		"machine's busy CPU over that time, in cores. Where the time goes, from the attempts recorded: the median " +
		"batch sending (its first attempt started → its last answered; the attempts in the order they started, 100 at a " +
		"time) and between batches (recording one and claiming the next). The floor, once Postgres is idle again: the " +
		"benchmark itself publishes as many messages of the same size with the same headers and the same confirms " +
		"(Redis XADD's reply, JetStream's publish ack, a RabbitMQ publisher confirm of a persistent mandatory message " +
		"on a channel of its own, one in flight per channel) from 100 goroutines (the endpoint's max_in_flight), on " +
		"connections opened before it starts, with the same clients Sluice uses; its deliveries/s = messages ÷ (first " +
		"publish → last confirm). Target: ≥ 0.8× the floor. This machine's ceiling is the deliveries/s at which every " +
		"core would be busy at the machine's CPU per delivery of the run (Sluice's, Postgres's, the broker's and the " +
		"benchmark's): cores × throughput ÷ cores busy; where it is under 0.8× the floor, the target cannot be met on " +
		"this machine without making a delivery cheaper.",
	MinTimeout: 6 * time.Minute,
	Run:        runBrokers,
}

var brokerKinds = []string{"redis", "nats", "amqp"}

func brokersMetrics() []Metric {
	var ms []Metric
	for _, k := range brokerKinds {
		ms = append(ms,
			Metric{Name: k + ": throughput", Unit: "deliveries/s"},
			Metric{Name: k + ": first delivery after the worker continued", Unit: "ms"},
			Metric{Name: k + ": the floor", Unit: "deliveries/s"},
			Metric{Name: k + ": throughput ÷ the floor's", Unit: "×", Target: 0.8},
			Metric{Name: k + ": this machine's ceiling ÷ the floor's", Unit: "×"},
			Metric{Name: k + ": Sluice CPU per delivery", Unit: "ms"},
			Metric{Name: k + ": Postgres CPU per delivery", Unit: "ms"},
			Metric{Name: k + ": cores busy", Unit: "of the machine's"},
			Metric{Name: k + ": a batch sending", Unit: "ms"},
			Metric{Name: k + ": between batches", Unit: "ms"})
	}
	return append(ms,
		Metric{Name: "http: throughput", Unit: "deliveries/s"},
		Metric{Name: "http: first delivery after the worker continued", Unit: "ms"},
		Metric{Name: "http: Sluice CPU per delivery", Unit: "ms"},
		Metric{Name: "http: Postgres CPU per delivery", Unit: "ms"},
		Metric{Name: "http: cores busy", Unit: "of the machine's"},
		Metric{Name: "http: a batch sending", Unit: "ms"},
		Metric{Name: "http: between batches", Unit: "ms"})
}

// benchBrokers are the running brokers, by kind, in dir.
type benchBrokers struct {
	dir string
	m   map[string]*brokertest.Broker
}

func startBenchBrokers() (*benchBrokers, error) {
	dir, err := os.MkdirTemp("", "sluice-bench-brokers-")
	if err != nil {
		return nil, fmt.Errorf("make the brokers' directory: %w", err)
	}
	bs := &benchBrokers{dir: dir, m: map[string]*brokertest.Broker{}}
	starts := map[string]func(string) (*brokertest.Broker, error){
		"redis": func(d string) (*brokertest.Broker, error) { return brokertest.StartRedis(d) },
		"nats":  func(d string) (*brokertest.Broker, error) { return brokertest.StartNATS(d) },
		"amqp":  func(d string) (*brokertest.Broker, error) { return brokertest.StartRabbitMQ(d) },
	}
	for _, k := range brokerKinds {
		d := dir + "/" + k
		if err := os.MkdirAll(d, 0o755); err != nil {
			bs.stop()
			return nil, fmt.Errorf("make %s: %w", d, err)
		}
		b, err := starts[k](d)
		if err != nil {
			bs.stop()
			return nil, fmt.Errorf("start %s: %w", k, err)
		}
		bs.m[k] = b
	}
	return bs, nil
}

func (bs *benchBrokers) stop() {
	for _, b := range bs.m {
		b.Stop()
	}
	_ = os.RemoveAll(bs.dir)
}

func runBrokers(ctx context.Context, env *Env) (Table, error) {
	events := env.size(10000, 2000)
	bs, err := startBenchBrokers()
	if err != nil {
		return Table{}, err
	}
	defer bs.stop()
	receivers := newReceivers(1)
	defer receivers.Close()
	worker := env.Procs.Sluice[len(env.Procs.Sluice)-1] // the one worker process (Workers: 1)
	t, err := env.Repeat(ctx, brokersMetrics(), func(ctx context.Context, run int) (s Sample, err error) {
		s.Values = map[string]float64{}
		for _, k := range brokerKinds {
			name := fmt.Sprintf("bench_%s_r%d", k, run)
			sink, err := newBrokerSink(ctx, k, bs.m[k], name)
			if err != nil {
				return s, err
			}
			rate, waking, cpu, err := brokersSluice(ctx, env, worker, k, bs.m[k], sink, name, events)
			if err != nil {
				sink.close()
				return s, fmt.Errorf("%s: %w", k, err)
			}
			s.Values[k+": throughput"] = rate
			s.Values[k+": first delivery after the worker continued"] = waking.Seconds() * 1000
			deliveryCPU(s.Values, k, cpu, events)
			if err := batchTimes(ctx, env, s.Values, k, "bench.brokers."+name); err != nil {
				sink.close()
				return s, fmt.Errorf("%s: %w", k, err)
			}
			if note := env.waitIdle(ctx, 30*time.Second); note != "" {
				s.Note = joinNotes(s.Note, "before the "+k+" floor: "+note)
			}
			floorSink, err := newBrokerSink(ctx, k, bs.m[k], name+"_floor")
			if err != nil {
				sink.close()
				return s, err
			}
			floor, err := brokersFloor(ctx, k, bs.m[k], floorSink, name+"_floor", events)
			sink.close()
			floorSink.close()
			if err != nil {
				return s, fmt.Errorf("%s floor: %w", k, err)
			}
			s.Values[k+": the floor"] = floor
			s.Values[k+": throughput ÷ the floor's"] = rate / floor
			s.Values[k+": this machine's ceiling ÷ the floor's"] = ceiling(rate, cpu) / floor
		}
		typ := fmt.Sprintf("bench.brokers.http.r%d", run)
		sinks, err := newSinks(ctx, env.API, receivers, brokersMaxInFlight, func(int) string { return typ })
		if err != nil {
			return s, fmt.Errorf("http endpoint: %w", err)
		}
		defer func() { s.Note = joinNotes(s.Note, sinks.Close(context.WithoutCancel(ctx), env.API)) }()
		rate, waking, cpu, err := fromBacklog(ctx, env, worker, typ, events, func(ctx context.Context, from, n int) (time.Time, time.Time, error) {
			arr := sinks.Await(ctx, n)
			if arr.Unique < n {
				return time.Time{}, time.Time{}, fmt.Errorf("%d of %d delivered", arr.Unique, n)
			}
			return arr.First[from].At, arr.Last, nil
		})
		if err != nil {
			return s, fmt.Errorf("http: %w", err)
		}
		s.Values["http: throughput"] = rate
		s.Values["http: first delivery after the worker continued"] = waking.Seconds() * 1000
		deliveryCPU(s.Values, "http", cpu, events)
		if err := batchTimes(ctx, env, s.Values, "http", typ); err != nil {
			return s, fmt.Errorf("http: %w", err)
		}
		return s, nil
	})
	t.Notes = append(t.Notes, fmt.Sprintf("%d events per run and kind after %d to warm up, max_in_flight %d, posted 1000 per request from 4 clients while the worker was stopped; the floor from %d goroutines",
		events, brokersWarm, brokersMaxInFlight, brokersMaxInFlight))
	return t, err
}

// brokersBodies are events batch bodies of 1000 events of type typ.
func brokersBodies(typ string, events int) [][]byte {
	var bodies [][]byte
	for first := 0; first < events; first += 1000 {
		evs := make([]EventIn, min(1000, events-first))
		for j := range evs {
			evs[j] = EventIn{Type: typ, Payload: payload(0, first+j)}
		}
		bodies = append(bodies, batchBody(evs))
	}
	return bodies
}

// brokersSluice delivers events to sink's name through an endpoint of
// kind and returns what fromBacklog does.
func brokersSluice(ctx context.Context, env *Env, worker int, kind string, b *brokertest.Broker, sink *brokerSink, name string, events int) (float64, time.Duration, cpuUse, error) {
	dest := map[string]any{"type": kind, "url": b.URL}
	switch kind {
	case "redis":
		dest["stream"] = name
	case "nats":
		dest["subject"] = name
	case "amqp":
		dest["routing_key"] = name
	}
	var ep struct {
		ID string `json:"id"`
	}
	if err := env.API.do(ctx, http.MethodPost, "/v1/endpoints", map[string]any{"destination": dest, "max_in_flight": brokersMaxInFlight},
		http.StatusCreated, &ep); err != nil {
		return 0, 0, cpuUse{}, err
	}
	typ := "bench.brokers." + name
	sub, err := env.API.Subscribe(ctx, ep.ID, typ)
	if err != nil {
		return 0, 0, cpuUse{}, err
	}
	defer func() { _ = env.API.DeleteSubscription(context.WithoutCancel(ctx), sub) }()
	return fromBacklog(ctx, env, worker, typ, events, func(ctx context.Context, from, n int) (time.Time, time.Time, error) {
		return sink.await(ctx, from, n, 3*time.Minute)
	})
}

// fromBacklog times the delivery of events of type typ from a backlog:
// it posts brokersWarm events and awaits them (the endpoint's
// connections open), stops the worker process, posts events more, and
// continues it once they are stored. await(from, n) returns when n events
// in all have arrived, with when the one after the first from arrived and
// when the last did. It returns deliveries/s from the first delivery of
// the backlog to its last, how long the worker took to make that first
// delivery once continued (its wake-up: the dispatch job fetched and the
// first claim made, which a worker already running does not wait for),
// and Sluice's CPU from the worker continued to the last delivery.
func fromBacklog(ctx context.Context, env *Env, worker int, typ string, events int,
	await func(ctx context.Context, from, n int) (time.Time, time.Time, error),
) (float64, time.Duration, cpuUse, error) {
	warm := postAll(ctx, brokersBodies(typ, brokersWarm), 1, env.API.PostBatch)
	if warm.failed > 0 {
		return 0, 0, cpuUse{}, fmt.Errorf("posting the warm-up events: %s", warm.note())
	}
	if _, _, err := await(ctx, 0, brokersWarm); err != nil {
		return 0, 0, cpuUse{}, fmt.Errorf("warm-up: %w", err)
	}
	if err := syscall.Kill(worker, syscall.SIGSTOP); err != nil {
		return 0, 0, cpuUse{}, fmt.Errorf("stop the worker: %w", err)
	}
	stopped := true
	defer func() {
		if stopped {
			_ = syscall.Kill(worker, syscall.SIGCONT)
		}
	}()
	res := postAll(ctx, brokersBodies(typ, events), 4, env.API.PostBatch)
	if res.failed > 0 {
		return 0, 0, cpuUse{}, fmt.Errorf("posting events: %s", res.note())
	}
	cpu := env.measureCPU()
	continued := time.Now()
	if err := syscall.Kill(worker, syscall.SIGCONT); err != nil {
		return 0, 0, cpuUse{}, fmt.Errorf("continue the worker: %w", err)
	}
	stopped = false
	first, last, err := await(ctx, brokersWarm, brokersWarm+events)
	use := cpu()
	if err != nil {
		return 0, 0, use, err
	}
	return float64(events-1) / last.Sub(first).Seconds(), first.Sub(continued), use, nil
}

// ceiling is the deliveries/s at which every core of the machine would be
// busy at the CPU a delivery took in a run of rate deliveries/s that used
// cpu: Sluice's, Postgres's, the broker's and the benchmark's own. A
// target above it cannot be met on this machine without making a
// delivery cheaper.
func ceiling(rate float64, cpu cpuUse) float64 {
	busy := cpu.cores(cpu.busy)
	if busy == 0 {
		return 0
	}
	return rate * cpu.cores(cpu.total) / busy
}

// deliveryCPU sets kind's CPU per delivery, Sluice's and Postgres's, and
// the cores the whole machine kept busy meanwhile: on 2 cores a delivery
// rate that leaves none idle is bound by CPU, whatever overlaps.
func deliveryCPU(values map[string]float64, kind string, cpu cpuUse, events int) {
	values[kind+": Sluice CPU per delivery"] = perEvent(cpu.sluice, events)
	if cpu.postgresKnown {
		values[kind+": Postgres CPU per delivery"] = perEvent(cpu.postgres, events)
	}
	values[kind+": cores busy"] = cpu.cores(cpu.busy)
}

// batchTimes sets kind's median time of a batch sending (its first
// attempt started → its last answered) and between batches (the last
// answered → the next batch's first attempt: recording a batch and
// claiming the next) from the attempts recorded for events of type typ,
// the warm-up's left out. Under a backlog every claim takes
// max_in_flight deliveries, so the attempts in the order they started,
// max_in_flight at a time, are the batches.
func batchTimes(ctx context.Context, env *Env, values map[string]float64, kind, typ string) error {
	var sending, between float64
	err := env.DB.QueryRow(ctx, `
		WITH a AS (
			SELECT da.at, da.at + da.latency_ms * interval '1 ms' AS done,
			       row_number() OVER (ORDER BY da.at, da.id) - 1 AS n
			FROM delivery_attempts da JOIN events e ON e.id = da.event_id
			WHERE e.type = $1),
		b AS (SELECT n / $2 AS batch, min(at) AS start, max(done) AS done FROM a WHERE n >= $3 GROUP BY 1),
		c AS (SELECT start, done, lead(start) OVER (ORDER BY batch) AS next FROM b)
		SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM done - start)), 0),
		       coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM next - done)), 0)
		FROM c WHERE next IS NOT NULL`,
		typ, brokersMaxInFlight, brokersWarm).Scan(&sending, &between)
	if err != nil {
		return fmt.Errorf("batch times: %w", err)
	}
	values[kind+": a batch sending"] = sending * 1000
	values[kind+": between batches"] = between * 1000
	return nil
}

// brokerSink is a destination in a broker (a stream, a subject's
// stream, a durable queue) and how many messages it holds.
type brokerSink struct {
	count func(ctx context.Context) (int, error)
	close func()
}

func newBrokerSink(ctx context.Context, kind string, b *brokertest.Broker, name string) (*brokerSink, error) {
	switch kind {
	case "redis":
		rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(b.Port), Protocol: 2, DisableIdentity: true})
		return &brokerSink{
			count: func(ctx context.Context) (int, error) {
				n, err := rdb.XLen(ctx, name).Result()
				return int(n), err //nolint:wrapcheck // the bench's own reading
			},
			close: func() { _ = rdb.Close() },
		}, nil
	case "nats":
		nc, err := nats.Connect(b.URL)
		if err != nil {
			return nil, fmt.Errorf("connect to nats: %w", err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("jetstream: %w", err)
		}
		st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: strings.ToUpper(name), Subjects: []string{name}, Storage: jetstream.FileStorage})
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("create stream %s: %w", name, err)
		}
		return &brokerSink{
			count: func(ctx context.Context) (int, error) {
				info, err := st.Info(ctx)
				if err != nil {
					return 0, fmt.Errorf("stream info: %w", err)
				}
				return int(info.State.Msgs), nil
			},
			close: func() { _ = js.DeleteStream(context.Background(), strings.ToUpper(name)); nc.Close() },
		}, nil
	case "amqp":
		conn, err := amqp.Dial(b.URL)
		if err != nil {
			return nil, fmt.Errorf("connect to rabbitmq: %w", err)
		}
		ch, err := conn.Channel()
		if err == nil {
			_, err = ch.QueueDeclare(name, true, false, false, false, nil)
		}
		if err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("declare queue %s: %w", name, err)
		}
		return &brokerSink{
			count: func(context.Context) (int, error) {
				q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
				return q.Messages, err //nolint:wrapcheck // the bench's own reading
			},
			close: func() { _, _ = ch.QueueDelete(name, false, false, false); _ = conn.Close() },
		}, nil
	}
	return nil, fmt.Errorf("no broker kind %q", kind)
}

// await polls the sink until it holds n messages, for at most limit, and
// returns when it first saw more than from, and when it first saw them all.
func (s *brokerSink) await(ctx context.Context, from, n int, limit time.Duration) (time.Time, time.Time, error) {
	got := 0
	var first time.Time
	for deadline := time.Now().Add(limit); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(5 * time.Millisecond) {
		var err error
		if got, err = s.count(ctx); err != nil {
			return first, time.Time{}, err
		}
		if got > from && first.IsZero() {
			first = time.Now()
		}
		if got >= n {
			return first, time.Now(), nil
		}
	}
	return first, time.Time{}, fmt.Errorf("%d of %d messages in the broker after %s", got, n, limit)
}

// brokersFloor publishes events messages to name from 100 goroutines,
// each waiting for its confirm, and returns messages/s.
func brokersFloor(ctx context.Context, kind string, b *brokertest.Broker, sink *brokerSink, name string, events int) (float64, error) {
	publish, closeFn, err := floorPublisher(ctx, kind, b, name)
	if err != nil {
		return 0, err
	}
	defer closeFn()
	body := []byte(fmt.Sprintf(`{"type":"bench.brokers.%s","timestamp":"2026-01-01T00:00:00Z","data":%s}`, name, payload(0, 0)))
	headers := [][2]string{
		{"webhook-id", "msg_2Yh5oRJgNNp1JcQVX8ZyYbYc3Lh"},
		{"webhook-timestamp", strconv.FormatInt(time.Now().Unix(), 10)},
		{"webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, brokersMaxInFlight)
	start := time.Now()
	for range brokersMaxInFlight {
		wg.Go(func() {
			for next.Add(1) <= int64(events) {
				if err := publish(ctx, body, headers); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	end := time.Now()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	n, err := sink.count(ctx)
	if err != nil {
		return 0, fmt.Errorf("count the floor's messages: %w", err)
	}
	if n < events {
		return 0, fmt.Errorf("the broker holds %d of the %d messages confirmed", n, events)
	}
	return float64(events) / end.Sub(start).Seconds(), nil
}

// floorPublisher is a publish to name that returns once the broker
// confirmed it, as Sluice's does.
func floorPublisher(ctx context.Context, kind string, b *brokertest.Broker, name string) (func(context.Context, []byte, [][2]string) error, func(), error) {
	switch kind {
	case "redis":
		rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(b.Port), Protocol: 2, DisableIdentity: true, PoolSize: brokersMaxInFlight})
		return func(ctx context.Context, body []byte, hs [][2]string) error {
			values := []any{"body", body}
			for _, h := range hs {
				values = append(values, h[0], h[1])
			}
			return rdb.XAdd(ctx, &redis.XAddArgs{Stream: name, Values: values}).Err() //nolint:wrapcheck // the bench's own
		}, func() { _ = rdb.Close() }, nil
	case "nats":
		nc, err := nats.Connect(b.URL)
		if err != nil {
			return nil, nil, fmt.Errorf("connect to nats: %w", err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			return nil, nil, fmt.Errorf("jetstream: %w", err)
		}
		return func(ctx context.Context, body []byte, hs [][2]string) error {
			msg := &nats.Msg{Subject: name, Data: body, Header: nats.Header{}}
			for _, h := range hs {
				msg.Header[h[0]] = []string{h[1]}
			}
			msg.Header["content-type"] = []string{"application/json"}
			_, err := js.PublishMsg(ctx, msg)
			return err //nolint:wrapcheck // the bench's own
		}, nc.Close, nil
	case "amqp":
		conn, err := amqp.Dial(b.URL)
		if err != nil {
			return nil, nil, fmt.Errorf("connect to rabbitmq: %w", err)
		}
		// A channel in confirm mode per goroutine, one publish in flight on
		// each, as Sluice's pool does.
		pool := make(chan *amqp.Channel, brokersMaxInFlight)
		for range brokersMaxInFlight {
			ch, err := conn.Channel()
			if err == nil {
				err = ch.Confirm(false)
			}
			if err != nil {
				_ = conn.Close()
				return nil, nil, fmt.Errorf("confirm-mode channel: %w", err)
			}
			pool <- ch
		}
		return func(ctx context.Context, body []byte, hs [][2]string) error {
			ch := <-pool
			defer func() { pool <- ch }()
			headers := amqp.Table{}
			for _, h := range hs {
				headers[h[0]] = h[1]
			}
			c, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", name, true, false, amqp.Publishing{
				Headers: headers, ContentType: "application/json", DeliveryMode: amqp.Persistent,
				MessageId: hs[0][1], Timestamp: time.Now(), Body: body,
			})
			if err != nil {
				return fmt.Errorf("publish: %w", err)
			}
			ok, err := c.WaitContext(ctx)
			if err != nil {
				return fmt.Errorf("confirm: %w", err)
			}
			if !ok {
				return errors.New("nacked")
			}
			return nil
		}, func() { _ = conn.Close() }, nil
	}
	return nil, nil, fmt.Errorf("no broker kind %q", kind)
}

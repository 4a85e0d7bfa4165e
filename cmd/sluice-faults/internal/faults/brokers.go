package faults

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/internal/testkit/brokertest"
)

// The broker scenarios: an endpoint of each broker kind (Redis Streams,
// NATS JetStream, RabbitMQ) beside an HTTP endpoint, every event
// delivered to all four, while each broker is killed with SIGKILL and
// started again on the same port with its data ("brokers"), or while
// RabbitMQ's memory alarm blocks its publishers ("rabbitmq-alarm"). Each
// broker is configured to keep what it acknowledged (docs/destinations.md):
// Redis with appendonly yes and appendfsync always, a JetStream stream on
// file storage, a durable RabbitMQ queue (Sluice publishes persistent
// messages with publisher confirms). A reader per broker takes every
// message out as it arrives, across restarts, so that the checks are: no
// accepted event missing from any broker, duplicates (at-least-once)
// counted, an attempt started after the broker's return confirmed within
// brokerResume of it (delivery_attempts),
// and the HTTP endpoint's delivery latency during the faults beside
// before.

// brokerResume is how soon after a broker's return (or the alarm lifted)
// its endpoint must be delivered to again.
const brokerResume = 5 * time.Second

// alarmWindow is the rabbitmq-alarm scenario's first throttle step,
// longer than its alarm: the endpoint is throttled once, and sends again
// when the window ends (a second 429 in a row would wait an hour).
const alarmWindow = 45 * time.Second

// brokerSettings: retries outlast a RabbitMQ restart (its Erlang VM takes
// tens of seconds to boot on a busy 2-core box), and no circuit opens, so
// that a delivery resumes at its next retry, not its circuit's next probe
// (SLUICE_CIRCUIT_PROBE, a minute by default).
var brokerSettings = []string{
	"SLUICE_RETRY_SCHEDULE=" + strings.TrimSuffix(strings.Repeat("500ms,", 240), ","),
	"SLUICE_CIRCUIT_THRESHOLD=100000",
}

// brokerScenarios are the broker scenarios, full size or scaled down.
func brokerScenarios(short bool) []Scenario {
	events, rate := 6000, 100.0
	if short {
		events, rate = 3000, 60
	}
	return []Scenario{
		{
			Name: "brokers", Title: fmt.Sprintf("redis, nats and rabbitmq each killed -9 and started again on its port, in turn, during a %d-event burst to an endpoint of each kind and an HTTP one", events),
			Events: events, Rate: rate, Clients: 8, Healthy: 1, Settings: brokerSettings,
			Own: func(ctx context.Context, s *Suite, sc Scenario) (Result, error) {
				return s.runBrokers(ctx, sc, []string{"redis", "nats", "rabbitmq"}, false)
			},
		},
		{
			Name: "rabbitmq-alarm", Title: fmt.Sprintf("rabbitmq's memory alarm (set_vm_memory_high_watermark 0.0000001) for 10s, then lifted (0.4), during a %d-event burst to a rabbitmq and an HTTP endpoint", events/2),
			Events: events / 2, Rate: rate, Clients: 8, Healthy: 1,
			Settings: append(slices.Clone(brokerSettings), "SLUICE_THROTTLE_SCHEDULE="+alarmWindow.String()+",1h"),
			Own: func(ctx context.Context, s *Suite, sc Scenario) (Result, error) {
				return s.runBrokers(ctx, sc, []string{"rabbitmq"}, true)
			},
		},
	}
}

// brokerEndpoint is one broker and its endpoint, with what its reader has
// taken out of it.
type brokerEndpoint struct {
	name string
	b    *brokertest.Broker
	dest map[string]any
	id   string // the endpoint's

	mu sync.Mutex
	// got counts each webhook-id read.
	got map[string]int
	// Where the reader goes on from after a reconnect: the last Redis
	// entry ID read, the next JetStream sequence number.
	redisLast string
	natsNext  uint64
}

func (be *brokerEndpoint) add(id string) {
	be.mu.Lock()
	be.got[id]++
	be.mu.Unlock()
}

func (be *brokerEndpoint) missing(ids []string) int {
	be.mu.Lock()
	defer be.mu.Unlock()
	n := 0
	for _, id := range ids {
		if be.got[id] == 0 {
			n++
		}
	}
	return n
}

// firstConfirmedAfter is when the first attempt to be's endpoint that
// started after t was confirmed by its broker (delivery_attempts: no
// error), or the zero time.
func (e *Env) firstConfirmedAfter(ctx context.Context, be *brokerEndpoint, t time.Time) (time.Time, error) {
	var at *time.Time
	err := e.DB.QueryRow(ctx, `SELECT min(at) FROM delivery_attempts WHERE endpoint_id = $1 AND at > $2 AND error IS NULL`, be.id, t).Scan(&at)
	if err != nil || at == nil {
		return time.Time{}, err //nolint:wrapcheck // named by the caller
	}
	return *at, nil
}

// startBroker starts the broker kind name in dir, ready for durable
// deliveries to hooks (stream, subject, queue).
func startBroker(ctx context.Context, name, dir string) (*brokerEndpoint, error) {
	be := &brokerEndpoint{name: name, got: map[string]int{}, natsNext: 1}
	var err error
	switch name {
	case "redis":
		if be.b, err = brokertest.StartRedis(dir, "--appendonly", "yes", "--appendfsync", "always"); err != nil {
			return nil, fmt.Errorf("start redis: %w", err)
		}
		be.dest = map[string]any{"type": "redis", "url": be.b.URL, "stream": "hooks"}
	case "nats":
		if be.b, err = brokertest.StartNATS(dir); err != nil {
			return nil, fmt.Errorf("start nats: %w", err)
		}
		nc, err := nats.Connect(be.b.URL)
		if err != nil {
			be.b.Stop()
			return nil, fmt.Errorf("connect to nats: %w", err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err == nil {
			_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "HOOKS", Subjects: []string{"hooks"}, Storage: jetstream.FileStorage})
		}
		if err != nil {
			be.b.Stop()
			return nil, fmt.Errorf("create the nats stream: %w", err)
		}
		be.dest = map[string]any{"type": "nats", "url": be.b.URL, "subject": "hooks"}
	case "rabbitmq":
		if be.b, err = brokertest.StartRabbitMQ(dir); err != nil {
			return nil, fmt.Errorf("start rabbitmq: %w", err)
		}
		conn, err := amqp.Dial(be.b.URL)
		if err != nil {
			be.b.Stop()
			return nil, fmt.Errorf("connect to rabbitmq: %w", err)
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err == nil {
			_, err = ch.QueueDeclare("hooks", true, false, false, false, nil)
		}
		if err != nil {
			be.b.Stop()
			return nil, fmt.Errorf("declare the rabbitmq queue: %w", err)
		}
		be.dest = map[string]any{"type": "amqp", "url": be.b.URL, "routing_key": "hooks"}
	default:
		return nil, fmt.Errorf("no broker %q", name)
	}
	return be, nil
}

// read takes every message out of the broker as it arrives until ctx
// ends, reconnecting whenever the broker goes away.
func (be *brokerEndpoint) read(ctx context.Context) {
	for ctx.Err() == nil {
		var err error
		switch be.name {
		case "redis":
			err = be.readRedis(ctx)
		case "nats":
			err = be.readNATS(ctx)
		case "rabbitmq":
			err = be.readRabbit(ctx)
		}
		if err != nil && ctx.Err() == nil {
			_ = sleep(ctx, 100*time.Millisecond)
		}
	}
}

// readRedis reads the stream from its start, then after the last entry
// read, until an error.
func (be *brokerEndpoint) readRedis(ctx context.Context) error {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(be.b.Port), Protocol: 2, DisableIdentity: true, MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	for ctx.Err() == nil {
		last := be.redisLast
		if last == "" {
			last = "-"
		}
		entries, err := rdb.XRangeN(ctx, "hooks", last, "+", 1000).Result()
		if err != nil {
			return fmt.Errorf("xrange: %w", err)
		}
		if len(entries) > 0 && entries[0].ID == last {
			entries = entries[1:]
		}
		for _, e := range entries {
			id, _ := e.Values["webhook-id"].(string)
			be.add(id)
			be.redisLast = e.ID
		}
		if len(entries) == 0 {
			_ = sleep(ctx, 50*time.Millisecond)
		}
	}
	return nil
}

// readNATS reads the stream by sequence number, from the last read on,
// until an error.
func (be *brokerEndpoint) readNATS(ctx context.Context) error {
	nc, err := nats.Connect(be.b.URL, nats.MaxReconnects(0))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	stream, err := js.Stream(ctx, "HOOKS")
	if err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	next := &be.natsNext
	for ctx.Err() == nil {
		info, err := stream.Info(ctx)
		if err != nil {
			return fmt.Errorf("stream info: %w", err)
		}
		if *next > info.State.LastSeq {
			_ = sleep(ctx, 50*time.Millisecond)
			continue
		}
		for ; *next <= info.State.LastSeq && ctx.Err() == nil; *next++ {
			m, err := stream.GetMsg(ctx, *next)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			if err != nil {
				return fmt.Errorf("get %d: %w", *next, err)
			}
			be.add(m.Header.Get("webhook-id"))
		}
	}
	return nil
}

// readRabbit consumes the queue, acknowledging each message once counted,
// until the channel closes. A message redelivered after a restart (read,
// its ack lost) is not counted again; a message published twice is.
func (be *brokerEndpoint) readRabbit(ctx context.Context) error {
	conn, err := amqp.Dial(be.b.URL)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("channel: %w", err)
	}
	if err := ch.Qos(500, 0, false); err != nil {
		return fmt.Errorf("qos: %w", err)
	}
	ds, err := ch.ConsumeWithContext(ctx, "hooks", "", false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	for d := range ds {
		id, _ := d.Headers["webhook-id"].(string)
		be.mu.Lock()
		seen := be.got[id] > 0
		be.mu.Unlock()
		if !d.Redelivered || !seen {
			be.add(id)
		}
		_ = d.Ack(false)
	}
	return errors.New("channel closed")
}

// runBrokers runs a broker scenario with the brokers named in kinds;
// alarm: RabbitMQ's memory alarm instead of restarts.
func (s *Suite) runBrokers(ctx context.Context, sc Scenario, kinds []string, alarm bool) (res Result, err error) {
	start := time.Now()
	s.logf("scenario %s: %s", sc.Name, sc.Title)
	res = Result{Name: sc.Name, Title: sc.Title, Dir: filepath.Join(s.dir, sc.Name)}
	e := &Env{}
	defer e.close()
	if err := s.newEnv(ctx, envConfig{name: sc.Name, healthy: sc.Healthy, tenants: 1, settings: sc.Settings}, e); err != nil {
		return res, fmt.Errorf("%s: setup: %w", sc.Name, err)
	}
	var eps []*brokerEndpoint
	defer func() {
		for _, be := range eps {
			be.b.Stop()
		}
	}()
	for _, k := range kinds {
		be, err := startBroker(ctx, k, filepath.Join(e.Dir, k))
		if err != nil {
			return res, fmt.Errorf("%s: %w", sc.Name, err)
		}
		eps = append(eps, be)
		var ep struct{ ID string }
		if err := e.call(ctx, "/v1/endpoints", map[string]any{"destination": be.dest, "max_in_flight": MaxInFlight}, &ep); err != nil {
			return res, err
		}
		be.id = ep.ID
		if err := e.call(ctx, "/v1/subscriptions", map[string]any{"endpoint_id": ep.ID, "event_types": []string{"*"}}, nil); err != nil {
			return res, err
		}
		s.logf("  %s on 127.0.0.1:%d", k, be.b.Port)
	}
	readCtx, stopReading := context.WithCancel(ctx)
	var readers sync.WaitGroup
	defer func() { stopReading(); readers.Wait() }()
	for _, be := range eps {
		readers.Go(func() { be.read(readCtx) })
	}
	if err := warmUp(ctx, e); err != nil {
		return res, fmt.Errorf("%s: warm-up: %w", sc.Name, err)
	}

	burst := time.Duration(float64(sc.Events) / sc.Rate * float64(time.Second))
	loadCtx, cancelLoad := context.WithTimeout(ctx, 3*burst+180*time.Second)
	defer cancelLoad()
	var (
		wg                  sync.WaitGroup
		posts               []Post
		injectErr           error
		loadStart, loadDone time.Time
		alarmFigures        brokerAlarm
	)
	loadStart = time.Now()
	wg.Go(func() {
		posts = Load{BaseURL: e.BaseURL, APIKey: e.Keys[0], Count: sc.Events, Clients: sc.Clients, Rate: sc.Rate,
			Timeout: 15 * time.Second, RetryFor: 60 * time.Second,
			Request: func(seq int) ([]byte, map[string]string, bool) { return eventBody("faults.burst", seq), nil, false },
		}.Run(loadCtx)
		loadDone = time.Now()
	})
	wg.Go(func() {
		if alarm {
			alarmFigures, injectErr = e.rabbitAlarm(loadCtx, eps[0], burst)
			return
		}
		injectErr = e.restartBrokers(loadCtx, eps, loadStart, burst)
	})
	wg.Wait()
	if injectErr != nil {
		res.Notes = append(res.Notes, "fault injection failed: "+injectErr.Error())
	}
	s.logf("  load done in %s; waiting for every accepted event to arrive", loadDone.Sub(loadStart).Round(time.Millisecond))

	ids, from := settling(e, posts, loadDone)
	missing := func() int {
		n := e.Receiver.Missing(e.Healthy, ids)
		for _, be := range eps {
			n += be.missing(ids)
		}
		return n
	}
	for deadline := from.Add(s.cfg.SettleLimit); missing() > 0 && time.Now().Before(deadline) && ctx.Err() == nil; {
		_ = sleep(ctx, 250*time.Millisecond)
	}
	settled := time.Since(from)
	res.DB, res.Notes = awaitDrained(ctx, e.DB, []string{e.URLs[e.Healthy[0]]}, 15*time.Second, res.Notes)
	notDone := brokerOutstanding(ctx, e, eps)

	res.Faults = e.Faults()
	res.MaxRSS = e.maxWorkerRSS()
	accepted := len(ids)
	statuses := map[string]int{}
	for _, p := range posts {
		statuses[p.StatusKey()]++
	}
	res.Figures = Figures{Posted: len(posts), Accepted: accepted, Statuses: statuses, Expected: accepted * (1 + len(eps)), Settle: settled}
	var cs []Check
	add := func(name string, pass bool, format string, args ...any) {
		cs = append(cs, Check{Name: name, Value: fmt.Sprintf(format, args...), Pass: pass})
	}
	add("every post accepted", accepted == len(posts), "%d of %d", accepted, len(posts))
	httpMissing := e.Receiver.Missing(e.Healthy, ids)
	res.Figures.Lost += httpMissing
	add("http: lost = 0", httpMissing == 0, "%d of %d", httpMissing, accepted)
	for _, be := range eps {
		lost := be.missing(ids)
		dups := 0
		be.mu.Lock()
		for _, id := range ids {
			dups += max(be.got[id]-1, 0)
		}
		be.mu.Unlock()
		res.Figures.Lost += lost
		res.Figures.Duplicates += dups
		add(be.name+": lost = 0 (every accepted event in the broker)", lost == 0, "%d of %d", lost, accepted)
		add(be.name+": duplicates (at-least-once) counted", true, "%d", dups)
	}
	res.Figures.Delivered = res.Figures.Expected - res.Figures.Lost
	for _, f := range res.Faults {
		for _, be := range eps {
			if !strings.HasSuffix(f.Kind, " "+be.name) {
				continue
			}
			first, err := e.firstConfirmedAfter(ctx, be, f.End)
			if err != nil {
				res.Notes = append(res.Notes, fmt.Sprintf("%s: read its attempts: %v", be.name, err))
			}
			resumed := first.Sub(f.End)
			if !alarm {
				add(fmt.Sprintf("%s: delivered again ≤ %s after %q", be.name, brokerResume, f.Kind),
					!first.IsZero() && resumed <= brokerResume, "%s", secsOrNever(first, resumed))
				continue
			}
			// Throttled at the alarm's start: sending again once the
			// window has ended and the alarm is lifted.
			by := maxTime(f.End, alarmFigures.firstBlocked.Add(alarmWindow)).Add(brokerResume)
			add(fmt.Sprintf("%s: delivered again ≤ %s after the later of the alarm's end and its throttle window's (%s from the first blocked attempt)", be.name, brokerResume, alarmWindow),
				!first.IsZero() && !first.After(by), "%s after the alarm lifted, %s after the window", secsOrNever(first, resumed),
				secsOrNever(first, first.Sub(alarmFigures.firstBlocked.Add(alarmWindow))))
		}
	}
	before, during := httpLatencies(posts, e.Receiver.Receipts(), e.Healthy[0], res.Faults)
	b99, d99 := percentile(before, 0.99), percentile(during, 0.99)
	bound := max(2*b99, b99+time.Second)
	add(fmt.Sprintf("http: p99 post→delivery during the faults ≤ max(2×, +1s) of before (%s over %d)", secs(b99), len(before)),
		len(during) > 0 && d99 <= bound, "%s over %d", secs(d99), len(during))
	if alarm {
		add("rabbitmq: throttled by the alarm (attempts recorded 'connection blocked')", alarmFigures.blocked > 0, "%d", alarmFigures.blocked)
		add("rabbitmq: no attempt spent during the alarm (failure_count unchanged)", alarmFigures.spent == 0, "%d", alarmFigures.spent)
	}
	add("every broker delivery recorded delivered", notDone == 0, "%d not delivered", notDone)
	add("nothing stuck in the database", res.DB.Stuck == 0 && res.DB.Unfanned == 0,
		"%d due without a dispatch job, %d events without fan-out", res.DB.Stuck, res.DB.Unfanned)
	for _, p := range append(e.apis(), e.Workers...) {
		res.Notes = append(res.Notes, p.UnexpectedExits()...)
		res.exits += len(p.UnexpectedExits())
	}
	add("no process exited by itself", res.exits == 0, "%d", res.exits)
	res.Checks = cs
	res.Pass = true
	for _, c := range cs {
		res.Pass = res.Pass && c.Pass
	}
	res.Wall = time.Since(start)
	return res, nil
}

// restartBrokers kills each broker in turn with SIGKILL, leaves it down
// two seconds and starts it again on its port; the fault ends when it is
// ready again.
func (e *Env) restartBrokers(ctx context.Context, eps []*brokerEndpoint, start time.Time, burst time.Duration) error {
	step := burst * 7 / 10 / time.Duration(len(eps))
	for k, be := range eps {
		if err := e.waitFault(ctx, start, burst/10+time.Duration(k)*step); err != nil {
			return err
		}
		at := time.Now()
		be.b.Kill()
		if err := be.b.WaitDown(30 * time.Second); err != nil {
			return fmt.Errorf("%s: %w", be.name, err)
		}
		if err := sleep(ctx, 2*time.Second); err != nil {
			return err
		}
		if err := be.b.Start(); err != nil {
			return fmt.Errorf("%s: %w", be.name, err)
		}
		e.record(Fault{Kind: "kill -9 and restart " + be.name, At: at, End: time.Now()})
	}
	return nil
}

// brokerAlarm is what the alarm did: attempts recorded blocked, and
// attempts spent (failure_count) on the RabbitMQ endpoint meanwhile.
type brokerAlarm struct {
	blocked, spent int
	firstBlocked   time.Time // the first blocked attempt's start: the throttle window opens as it ends
}

// rabbitAlarm sets RabbitMQ's memory high watermark so low that the alarm
// blocks every publisher, for 10 s from a quarter into the burst, then
// back to 0.4; the fault ends when it is set back.
func (e *Env) rabbitAlarm(ctx context.Context, be *brokerEndpoint, burst time.Duration) (brokerAlarm, error) {
	var a brokerAlarm
	if err := e.waitFault(ctx, time.Now(), burst/4); err != nil {
		return a, err
	}
	spent := func() (int, error) {
		var n int
		err := e.DB.QueryRow(ctx, `SELECT coalesce(sum(failure_count), 0) FROM deliveries WHERE endpoint_id = $1`, be.id).Scan(&n)
		if err != nil {
			return 0, fmt.Errorf("read failure_count: %w", err)
		}
		return n, nil
	}
	before, err := spent()
	if err != nil {
		return a, err
	}
	if _, err := be.b.RunCtl(ctx, "set_vm_memory_high_watermark", "0.0000001"); err != nil {
		return a, fmt.Errorf("alarm on: %w", err)
	}
	at := time.Now() // rabbitmqctl's Erlang VM takes seconds to start: on from here
	if err := sleep(ctx, 10*time.Second); err != nil {
		return a, err
	}
	if _, err := be.b.RunCtl(ctx, "set_vm_memory_high_watermark", "0.4"); err != nil {
		return a, fmt.Errorf("alarm off: %w", err)
	}
	e.record(Fault{Kind: "memory alarm on rabbitmq", At: at, End: time.Now()})
	after, err := spent()
	if err != nil {
		return a, err
	}
	a.spent = after - before
	var first *time.Time
	err = e.DB.QueryRow(ctx, `SELECT count(*), min(at) FROM delivery_attempts WHERE endpoint_id = $1 AND error LIKE '%connection blocked%'`, be.id).Scan(&a.blocked, &first)
	if first != nil {
		a.firstBlocked = *first
	}
	if err != nil {
		return a, fmt.Errorf("count blocked attempts: %w", err)
	}
	return a, nil
}

// brokerOutstanding counts the broker endpoints' deliveries not recorded
// delivered, waiting up to 15 s for them (attempts are recorded
// asynchronously).
func brokerOutstanding(ctx context.Context, e *Env, eps []*brokerEndpoint) int {
	var ids []string
	for _, be := range eps {
		ids = append(ids, be.id)
	}
	n := -1
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; {
		err := e.DB.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE endpoint_id = ANY($1::uuid[]) AND status <> 'delivered'`, ids).Scan(&n)
		if err != nil {
			return -1
		}
		if n == 0 {
			return 0
		}
		_ = sleep(ctx, 500*time.Millisecond)
	}
	return n
}

// httpLatencies are the HTTP endpoint's post→first-receipt times of the
// events posted before the first fault, and of those posted during a
// fault or within brokerResume after it.
func httpLatencies(posts []Post, receipts []Receipt, endpoint string, faults []Fault) (before, during []time.Duration) {
	first := map[string]time.Time{}
	for _, r := range receipts {
		if r.Endpoint != endpoint {
			continue
		}
		if t, ok := first[r.ID]; !ok || r.At.Before(t) {
			first[r.ID] = r.At
		}
	}
	for _, p := range posts {
		got, ok := first[p.EventID]
		if !p.Accepted() || !ok || len(faults) == 0 {
			continue
		}
		lat := got.Sub(p.Done)
		switch {
		case p.Done.Before(faults[0].At):
			before = append(before, lat)
		default:
			for _, f := range faults {
				if !p.Done.Before(f.At) && p.Done.Before(f.End.Add(brokerResume)) {
					during = append(during, lat)
					break
				}
			}
		}
	}
	return before, during
}

func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func secsOrNever(first time.Time, d time.Duration) string {
	if first.IsZero() {
		return "never"
	}
	return secs(d)
}

package faults

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Scenario is one fault run: a burst of single-event posts (Events at Rate
// per second from Clients senders) to Healthy endpoints (and Bad ones),
// with Inject injecting faults meanwhile.
type Scenario struct {
	Name, Title string
	Events      int
	Rate        float64
	Clients     int
	Healthy     int
	Bad         []Mode
	// Poison, when set, is how many bad requests a second tenant posts
	// beside the main (victim) tenant's load.
	Poison int
	// Inject runs beside the load; burst is the load's planned duration.
	Inject func(ctx context.Context, e *Env, burst time.Duration) error
	Bounds Bounds
	// DB is how the sluice processes reach Postgres (default: directly).
	DB DBSetup
	// Endpoints are the scenario's own endpoints beside the healthy and
	// bad ones, and Settings more SLUICE_* settings of every process.
	Endpoints []EndpointSpec
	Settings  []string
	// OpEvents: after the load, wait until every endpoint's queue is
	// drained and reconcile Sluice's transitions with the operational
	// events reporting them (transitions.go).
	OpEvents bool
	// FIFO: the scenario's load, endpoints and checks are the FIFO
	// scenario's own (fifo.go); Inject and Settings apply.
	FIFO bool
	// APIs is how many API processes run, behind the suite's balancer
	// when more than one (default 1).
	APIs int
	// Upgrade: the processes start on the previous binary
	// (Config.UpgradeFrom) and Inject upgrades them (Env.RollingUpgrade).
	Upgrade bool
	// Own, when set, runs the scenario instead of Suite.Run: its own
	// endpoints, load and checks (brokers.go).
	Own func(ctx context.Context, s *Suite, sc Scenario) (Result, error)
}

// EndpointSpec is one of a scenario's own endpoints.
type EndpointSpec struct {
	Name  string
	Mode  Mode     // how its receiver answers at first
	Types []string // its subscription's event types; nil: *
}

// Bounds are what a scenario must meet.
type Bounds struct {
	// Stall is the longest an endpoint with deliveries outstanding may go
	// without a delivery, Postgres outages not counted.
	Stall time.Duration
	// PGBack, when set: after Postgres is back, the first delivery within
	// PGBack and every endpoint with deliveries outstanding served within
	// PGServeAll.
	PGBack, PGServeAll time.Duration
	// AsyncLoss: the fault stops Postgres at once, losing its last
	// asynchronous commits (DupBound).
	AsyncLoss bool
	// ConnErrors allows posts without an answer (the API is killed).
	ConnErrors bool
	// OutageAnswer, when set: every post attempt in flight during a
	// Postgres outage is answered within it (sluice's bound on waiting for
	// the database, SLUICE_DB_TIMEOUT, plus a second).
	OutageAnswer time.Duration
	// AcceptBack, when set: after a Postgres outage, a post is accepted
	// within it.
	AcceptBack time.Duration
	// No503: not even a 503 is allowed (a planned change).
	No503 bool
}

// dbBound is sluice's default bound on a request's wait for the database
// (SLUICE_DB_TIMEOUT), which the suite leaves as it is.
const dbBound = 5 * time.Second

// Scenario sizes: full (make faults) and short (-short, make test).
type size struct {
	events  int
	rate    float64
	kills   int
	crashes int
	pause   time.Duration
	hold    time.Duration // how long the proxy holds every byte
}

// Scenarios returns every scenario, full size or scaled down.
func Scenarios(short bool) []Scenario {
	// Rates stay below what two workers deliver to 4 endpoints while the
	// API ingests single posts on a 2-core box (about 1,000 deliveries/s),
	// so that settle times measure recovery rather than a backlog.
	big := size{events: 10000, rate: 250, kills: 5, crashes: 3, pause: 5 * time.Second}
	mid := size{events: 5000, rate: 200, crashes: 3, pause: 5 * time.Second, hold: 20 * time.Second}
	if short {
		big = size{events: 1500, rate: 150, kills: 1, crashes: 1, pause: 3 * time.Second}
		mid = size{events: 1500, rate: 150, crashes: 1, pause: 3 * time.Second, hold: 7 * time.Second}
	}
	// A burst that outlasts the outage: it starts a quarter in.
	outage := size{events: int(150 * (mid.hold.Seconds()*2 + 10)), rate: 150}
	held := Bounds{Stall: 10 * time.Second, PGBack: 5 * time.Second, PGServeAll: 10 * time.Second,
		OutageAnswer: dbBound + time.Second, AcceptBack: 5 * time.Second}
	moved := Bounds{Stall: 10 * time.Second, PGBack: 10 * time.Second, PGServeAll: 15 * time.Second,
		OutageAnswer: dbBound + time.Second, AcceptBack: 10 * time.Second, AsyncLoss: true}
	stall := Bounds{Stall: 10 * time.Second}
	pg := Bounds{Stall: 10 * time.Second, PGBack: 5 * time.Second, PGServeAll: 10 * time.Second}
	crash := pg
	crash.AsyncLoss = true
	return append([]Scenario{
		{
			Name: "workerkill", Title: fmt.Sprintf("kill -9 a worker %d times during a %d-event burst", big.kills, big.events),
			Events: big.events, Rate: big.rate, Clients: 12, Healthy: 4, Bounds: stall,
			Inject: func(ctx context.Context, e *Env, burst time.Duration) error {
				start := time.Now()
				step := burst * 8 / 10 / time.Duration(big.kills)
				for k := range big.kills {
					if err := e.waitFault(ctx, start, burst/10+time.Duration(k)*step); err != nil {
						return err
					}
					if err := e.KillWorker(ctx, k%Workers, time.Second); err != nil {
						return err
					}
				}
				return nil
			},
		},
		{
			Name: "apikill", Title: fmt.Sprintf("kill -9 the API mid-burst (%d events)", big.events),
			Events: big.events, Rate: big.rate, Clients: 12, Healthy: 4,
			Bounds: Bounds{Stall: 10 * time.Second, ConnErrors: true},
			Inject: func(ctx context.Context, e *Env, burst time.Duration) error {
				start := time.Now()
				if err := e.waitFault(ctx, start, burst*4/10); err != nil {
					return err
				}
				return e.KillAPI(ctx, time.Second)
			},
		},
		{
			Name: "pgcrash", Title: fmt.Sprintf("postgres stop -m immediate + start, %d times during a %d-event burst", mid.crashes, mid.events),
			Events: mid.events, Rate: mid.rate, Clients: 12, Healthy: 4, Bounds: crash,
			Inject: func(ctx context.Context, e *Env, burst time.Duration) error {
				start := time.Now()
				step := burst * 7 / 10 / time.Duration(mid.crashes)
				for k := range mid.crashes {
					if err := e.waitFault(ctx, start, burst/5+time.Duration(k)*step); err != nil {
						return err
					}
					if err := e.CrashPG(ctx, time.Second); err != nil {
						return err
					}
				}
				return nil
			},
		},
		{
			Name: "pgcrash4", Title: fmt.Sprintf("postgres stop -m immediate 4 times in a row (0.5s up between) during a %d-event burst", mid.events),
			Events: mid.events, Rate: mid.rate, Clients: 12, Healthy: 4, Bounds: crash,
			Inject: func(ctx context.Context, e *Env, burst time.Duration) error {
				start := time.Now()
				if err := e.waitFault(ctx, start, burst*3/10); err != nil {
					return err
				}
				for range 4 {
					if err := e.CrashPG(ctx, 500*time.Millisecond); err != nil {
						return err
					}
					if err := sleep(ctx, 500*time.Millisecond); err != nil {
						return err
					}
				}
				return nil
			},
		},
		{
			Name: "pgpause", Title: fmt.Sprintf("SIGSTOP every postgres process for %s, then SIGCONT, during a %d-event burst", mid.pause, mid.events),
			Events: mid.events, Rate: mid.rate, Clients: 12, Healthy: 4, Bounds: pg,
			Inject: func(ctx context.Context, e *Env, burst time.Duration) error {
				start := time.Now()
				if err := e.waitFault(ctx, start, burst*3/10); err != nil {
					return err
				}
				return e.PausePG(ctx, mid.pause)
			},
		},
		{
			Name: "partition", Title: fmt.Sprintf("every byte between sluice and postgres held %s, then the connections reset, during a %d-event burst", mid.hold, outage.events),
			Events: outage.events, Rate: outage.rate, Clients: 12, Healthy: 4, Bounds: held, DB: DBProxy,
			Inject: func(ctx context.Context, e *Env, burst time.Duration) error {
				if err := e.waitFault(ctx, time.Now(), burst/4); err != nil {
					return err
				}
				return e.HoldDB(ctx, mid.hold, true)
			},
		},
		{
			Name: "blip", Title: fmt.Sprintf("every byte between sluice and postgres held %s, then let go on, during a %d-event burst", mid.hold, outage.events),
			Events: outage.events, Rate: outage.rate, Clients: 12, Healthy: 4, Bounds: held, DB: DBProxy,
			Inject: func(ctx context.Context, e *Env, burst time.Duration) error {
				if err := e.waitFault(ctx, time.Now(), burst/4); err != nil {
					return err
				}
				return e.HoldDB(ctx, mid.hold, false)
			},
		},
		{
			Name: "failover", Title: fmt.Sprintf("the primary stopped -m immediate, its synchronous standby promoted 2s later, during a %d-event burst", mid.events),
			Events: mid.events, Rate: mid.rate, Clients: 12, Healthy: 4, Bounds: moved, DB: DBStandby,
			Inject: func(ctx context.Context, e *Env, burst time.Duration) error {
				if err := e.waitFault(ctx, time.Now(), burst*3/10); err != nil {
					return err
				}
				return e.Failover(ctx, 2*time.Second)
			},
		},
		patroniScenario("patroni-kill", "the Patroni leader node killed whole (kill -9 its patroni and its postgres)", moved,
			func(ctx context.Context, e *Env) error { return e.KillPatroni(ctx, true) }),
		patroniScenario("patroni-agent", "only the Patroni leader's agent killed (kill -9; its postgres lives on, no watchdog)", moved,
			func(ctx context.Context, e *Env) error { return e.KillPatroni(ctx, false) }),
		patroniPartition(moved),
		patroniSwitchover(moved),
		{
			Name: "pgbouncer", Title: "PgBouncer (transaction pooling, sessions straight to postgres) killed -9 and restarted after 1s, twice, during a 4000-event burst",
			Events: 4000, Rate: 100, Clients: 12, Healthy: 4, Bounds: held, DB: DBBouncer,
			Inject: func(ctx context.Context, e *Env, burst time.Duration) error {
				start := time.Now()
				for _, at := range []time.Duration{burst / 4, burst / 2} {
					if err := e.waitFault(ctx, start, at); err != nil {
						return err
					}
					if err := e.KillBouncer(ctx, time.Second); err != nil {
						return err
					}
				}
				return nil
			},
		},
		{
			Name: "rolling-upgrade", Title: "two API processes behind a balancer and two workers on the previous binary, then migrate and each replaced in turn by the new binary (SIGTERM), during a 4000-event burst",
			Events: 4000, Rate: 100, Clients: 12, Healthy: 4, APIs: 2, Upgrade: true,
			Bounds: Bounds{Stall: 10 * time.Second, No503: true},
			Inject: func(ctx context.Context, e *Env, burst time.Duration) error {
				if err := e.waitFault(ctx, time.Now(), burst/5); err != nil {
					return err
				}
				return e.RollingUpgrade(ctx, e.newBin, 3*time.Second)
			},
		},
		{
			Name: "badreceivers", Title: fmt.Sprintf("endpoints that hang, reset, stream 50 MB beside 4 healthy ones (%d events)", mid.events),
			Events: mid.events, Rate: mid.rate, Clients: 12, Healthy: 4, Bad: []Mode{ModeHang, ModeReset, ModeStream},
			Bounds: Bounds{Stall: 5 * time.Second},
		},
		transitions(short),
		fifoScenario(short),
		{
			Name: "poison", Title: fmt.Sprintf("a tenant posting invalid UTF-8 and NULs beside a victim tenant (%d events)", mid.events),
			Events: mid.events, Rate: mid.rate, Clients: 12, Healthy: 4, Poison: mid.events / 5,
			Bounds: Bounds{Stall: 5 * time.Second},
		},
	}, brokerScenarios(short)...)
}

// switchoverBound is the database bound (SLUICE_DB_TIMEOUT) of the
// switchover scenario: above the time a planned switchover leaves no
// server taking writes on a loaded 2-core machine (4–6 s), as
// docs/patroni.md advises for a deployment whose handover is that slow.
const switchoverBound = 10 * time.Second

// patroniSwitchover is a planned switchover, which no post may see: not
// even a 503, every post held until the new leader takes writes.
func patroniSwitchover(b Bounds) Scenario {
	b.No503 = true
	b.OutageAnswer = switchoverBound + time.Second
	s := patroniScenario("patroni-switchover", "a planned patronictl switchover to the synchronous standby", b,
		func(ctx context.Context, e *Env) error { return e.SwitchoverPatroni(ctx) })
	s.Settings = append(s.Settings, "SLUICE_DB_TIMEOUT="+switchoverBound.String())
	return s
}

// patroniScenario is a fault on a Patroni cluster (DBPatroni) a quarter
// into a burst that outlasts the time without a leader (up to
// ttl, 10 s, and the election): the first delivery within 5 s of the new
// leader, every post answered within the database bound.
func patroniScenario(name, what string, b Bounds, inject func(context.Context, *Env) error) Scenario {
	const events = 4000 // 40 s at 100/s
	b.PGBack = 5 * time.Second
	// A synchronous standby is promoted: no commit acknowledged is lost,
	// but dispatch records its attempts asynchronously.
	b.AsyncLoss = true
	return Scenario{
		Name: name, Title: fmt.Sprintf("%s, during a %d-event burst", what, events),
		Events: events, Rate: 100, Clients: 12, Healthy: 4, Bounds: b, DB: DBPatroni,
		Inject: func(ctx context.Context, e *Env, burst time.Duration) error {
			if err := e.waitFault(ctx, time.Now(), burst/4); err != nil {
				return err
			}
			return inject(ctx, e)
		},
	}
}

// patroniPartition cuts the leader off from etcd and its replicas while
// sluice still reaches it: its Patroni, out of touch with etcd, demotes it
// and a standby takes over once the leader key expires.
func patroniPartition(b Bounds) Scenario {
	sc := patroniScenario("patroni-partition", "the Patroni leader cut off from etcd and its replicas (held at proxies), sluice still reaching it", b,
		func(ctx context.Context, e *Env) error { return e.PartitionPatroni(ctx) })
	sc.DB = DBPatroniProxied
	return sc
}

// faultGap is the least time between the end of one fault and the next
// (Postgres crash recovery can take seconds, and faults must not pile up).
const faultGap = 4 * time.Second

// waitFault waits until offset after start (the load starts with Inject),
// and at least faultGap after the end of the last fault.
func (e *Env) waitFault(ctx context.Context, start time.Time, offset time.Duration) error {
	at := start.Add(offset)
	if fs := e.Faults(); len(fs) > 0 {
		at = maxTime(at, fs[len(fs)-1].End.Add(faultGap))
	}
	return sleep(ctx, time.Until(at))
}

// Select returns the scenarios whose names are in the comma-separated
// list run ("" or "all": every one).
func Select(all []Scenario, run string) ([]Scenario, error) {
	if run == "" || run == "all" {
		return all, nil
	}
	var out []Scenario
	for _, name := range strings.Split(run, ",") {
		found := false
		for _, sc := range all {
			if sc.Name == strings.TrimSpace(name) {
				out, found = append(out, sc), true
			}
		}
		if !found {
			var names []string
			for _, sc := range all {
				names = append(names, sc.Name)
			}
			return nil, fmt.Errorf("no scenario %q (have: %s)", name, strings.Join(names, ", "))
		}
	}
	return out, nil
}

// poisonKinds names poisonRequest's requests by seq % len(poisonKinds).
var poisonKinds = []string{
	"payload invalid UTF-8 byte", "payload \\ud800", "payload \\u0000", "coalesce_key \\u0000",
	"Idempotency-Key NUL byte", "Idempotency-Key invalid UTF-8", "type invalid UTF-8", "batch with a \\u0000 coalesce_key",
}

// poisonRequest is the poisoning tenant's request seq: each one carries
// text Sluice must refuse with a 4xx (invalid UTF-8 or a NUL, in the
// payload, the type, the coalesce_key or the Idempotency-Key header), sent
// by hand so that nothing on the way cleans it up.
func poisonRequest(seq int) ([]byte, map[string]string, bool) {
	good := func(extra string) []byte {
		return fmt.Appendf(nil, `{"type":"faults.poison","payload":{"seq":%d}%s}`, seq, extra)
	}
	switch seq % len(poisonKinds) {
	case 0: // a raw invalid UTF-8 byte in a payload string
		return fmt.Appendf(nil, `{"type":"faults.poison","payload":{"seq":%d,"s":"bad \xff\xfe byte"}}`, seq), nil, true
	case 1: // an escaped lone surrogate in the payload
		return fmt.Appendf(nil, `{"type":"faults.poison","payload":{"seq":%d,"s":"\ud800"}}`, seq), nil, true
	case 2: // an escaped NUL in the payload
		return fmt.Appendf(nil, `{"type":"faults.poison","payload":{"seq":%d,"s":"a\u0000b"}}`, seq), nil, true
	case 3: // an escaped NUL in coalesce_key
		return good(`,"coalesce_key":"k\u0000ey"`), nil, true
	case 4: // a NUL byte in the Idempotency-Key header
		return good(""), map[string]string{"Idempotency-Key": fmt.Sprintf("key-%d-\x00-nul", seq)}, true
	case 5: // invalid UTF-8 in the Idempotency-Key header
		return good(""), map[string]string{"Idempotency-Key": fmt.Sprintf("key-%d-\xff\xfe", seq)}, true
	case 6: // invalid UTF-8 in the type
		return fmt.Appendf(nil, `{"type":"faults.\xff","payload":{"seq":%d}}`, seq), nil, true
	default: // a batch: one good event, one with a NUL in coalesce_key
		return fmt.Appendf(nil, `{"events":[{"type":"faults.poison","payload":{"seq":%d}},{"type":"faults.poison","payload":{"seq":%d},"coalesce_key":"\u0000"}]}`, seq, seq),
			map[string]string{"path": "/v1/events/batch"}, true
	}
}

package faults

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The transitions scenario: endpoints whose circuits open and close, whose
// deliveries go dead and which are disabled, while workers are killed with
// SIGKILL; then every transition Postgres stored is matched with the
// operational event that reports it (internal/sluice/opevent.go), which
// commits in the same transaction, and every such event with its arrival
// at the tenant's endpoint subscribed to sluice.*.

// Endpoint names of the transitions scenario.
const (
	opsEndpoint = "ops" // subscribed to sluice.*, always 200
	// opsFailing is subscribed to sluice.* too, and picky: its deliveries
	// of operational events go dead, which no event may report.
	opsFailing  = "opsfail"
	flapPrefix  = "flap"  // fail with 500 for spells, so their circuits open and close
	pickyPrefix = "picky" // refuse one event in pickyEvery: those go dead
	gonePrefix  = "gone"  // 200, then 410 from a point in the burst: disabled
)

// transitionSettings make transitions quick: a circuit opens after 3
// failures in a row and probes after 50 ms (doubling), and a delivery is
// dead after 3 failed attempts.
var transitionSettings = []string{
	"SLUICE_CIRCUIT_THRESHOLD=3",
	"SLUICE_CIRCUIT_PROBE=50ms",
	"SLUICE_RETRY_SCHEDULE=20ms,50ms",
}

func transitions(short bool) Scenario {
	// About 8 deliveries an event: below what two workers deliver on a
	// 2-core box (Scenarios).
	events, rate, kills := 5000, 120.0, 8
	if short {
		events, rate, kills = 1000, 80, 3
	}
	var eps []EndpointSpec
	for i := range 2 {
		eps = append(eps,
			EndpointSpec{Name: fmt.Sprintf("%s%d", flapPrefix, i), Mode: ModeOK},
			EndpointSpec{Name: fmt.Sprintf("%s%d", pickyPrefix, i), Mode: ModePicky},
			EndpointSpec{Name: fmt.Sprintf("%s%d", gonePrefix, i), Mode: ModeOK})
	}
	eps = append(eps, EndpointSpec{Name: opsEndpoint, Mode: ModeOK, Types: []string{"sluice.*"}},
		EndpointSpec{Name: opsFailing, Mode: ModePicky, Types: []string{"sluice.*"}})
	return Scenario{
		Name: "transitions",
		Title: fmt.Sprintf("circuits flapping, deliveries dying, endpoints answering 410, kill -9 a worker %d times, during a %d-event burst: every transition ⇔ its operational event",
			kills, events),
		Events: events, Rate: rate, Clients: 8, Healthy: 2, Bounds: Bounds{Stall: 10 * time.Second},
		Endpoints: eps, Settings: transitionSettings, OpEvents: true,
		Inject: func(ctx context.Context, e *Env, burst time.Duration) error {
			return injectTransitions(ctx, e, burst, kills, eps)
		},
	}
}

// injectTransitions, for the length of the burst: flaps the flap
// endpoints between spells of 500 and of 200, turns each gone endpoint to
// 410 at its own point, closes the flap endpoints' circuits by hand now
// and then, and kills a worker kills times. Once the burst is over the
// flap endpoints answer 200 again (awaitDrained deals with the picky ones).
func injectTransitions(ctx context.Context, e *Env, burst time.Duration, kills int, eps []EndpointSpec) error {
	start := time.Now()
	flapCtx, stopFlap := context.WithCancel(ctx)
	defer stopFlap()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		callErr error
	)
	var flaps, gones []string
	for _, ep := range eps {
		switch {
		case strings.HasPrefix(ep.Name, flapPrefix):
			flaps = append(flaps, ep.Name)
		case strings.HasPrefix(ep.Name, gonePrefix):
			gones = append(gones, ep.Name)
		}
	}
	for i, name := range flaps {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
			for failing := i%2 == 0; flapCtx.Err() == nil; failing = !failing {
				mode, spell := ModeOK, time.Duration(500+rng.IntN(1000))*time.Millisecond
				if failing {
					mode, spell = ModeFail, time.Duration(300+rng.IntN(500))*time.Millisecond
				}
				e.Receiver.SetMode(name, mode)
				_ = sleep(flapCtx, spell)
			}
		})
	}
	wg.Go(func() {
		for i, name := range gones {
			if sleep(flapCtx, time.Until(start.Add(burst*time.Duration(i+1)/time.Duration(len(gones)+1)))) != nil {
				return
			}
			e.Receiver.SetMode(name, ModeGone)
		}
	})
	wg.Go(func() { // by hand: the circuits the database says are open, now and then
		for sleep(flapCtx, 500*time.Millisecond) == nil {
			for _, name := range flaps {
				var state string
				err := e.DB.QueryRow(flapCtx, `SELECT circuit_state FROM endpoints WHERE id = $1`, e.EndpointIDs[name]).Scan(&state)
				if err == nil && state != "closed" {
					err = e.CloseCircuit(flapCtx, name)
				}
				if err != nil && flapCtx.Err() == nil {
					mu.Lock()
					callErr = fmt.Errorf("close %s's circuit: %w", name, err)
					mu.Unlock()
				}
			}
		}
	})

	var err error
	step := burst * 8 / 10 / time.Duration(kills)
	for k := range kills {
		if err = e.waitFault(ctx, start, burst/10+time.Duration(k)*step); err != nil {
			break
		}
		if err = e.KillWorker(ctx, k%Workers, time.Second); err != nil {
			break
		}
	}
	_ = sleep(ctx, time.Until(start.Add(burst)))
	stopFlap()
	wg.Wait()
	for _, name := range flaps {
		e.Receiver.SetMode(name, ModeOK)
	}
	if err != nil {
		return err
	}
	return callErr
}

// awaitDrained waits, until deadline, for every enabled endpoint's queue
// to be empty (each delivery delivered or dead), every event fanned out,
// and every operational event received at the ops endpoint. It returns
// what is still outstanding at the deadline ("" once drained).
//
// Meanwhile it closes by hand the open circuit of every picky endpoint
// with deliveries queued: once a picky endpoint has only refused
// deliveries left, each probe fails and the next waits twice as long, up
// to an hour (flow.DefaultMaxProbe); each close lets them spend an attempt.
func (e *Env) awaitDrained(ctx context.Context, eps []EndpointSpec, deadline time.Time) string {
	var picky []string
	for _, ep := range eps {
		if ep.Mode == ModePicky {
			picky = append(picky, e.EndpointIDs[ep.Name])
		}
	}
	for {
		var queued, unfanned int
		err := e.DB.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM deliveries d JOIN endpoints en ON en.id = d.endpoint_id
			        WHERE d.status IN ('pending','failed') AND NOT en.disabled),
			       (SELECT count(*) FROM events v WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = v.id))`).
			Scan(&queued, &unfanned)
		var ops, blocked []string
		if err == nil {
			ops, err = opEventIDs(ctx, e.DB)
		}
		if err == nil {
			blocked, err = blockedCircuits(ctx, e, picky)
		}
		for _, name := range blocked {
			if err = e.CloseCircuit(ctx, name); err != nil {
				break
			}
		}
		missing := e.Receiver.Missing([]string{opsEndpoint}, ops)
		state := fmt.Sprintf("%d deliveries queued at enabled endpoints, %d events without deliveries, %d operational events not at %s",
			queued, unfanned, missing, opsEndpoint)
		switch {
		case err != nil:
			state = "db: " + err.Error()
		case queued == 0 && unfanned == 0 && missing == 0:
			return ""
		}
		if time.Now().After(deadline) || sleep(ctx, 250*time.Millisecond) != nil {
			return state
		}
	}
}

// blockedCircuits names the endpoints of ids whose circuit is open while
// deliveries are queued for them.
func blockedCircuits(ctx context.Context, e *Env, ids []string) ([]string, error) {
	rows, err := e.DB.Query(ctx, `
		SELECT en.id::text FROM endpoints en
		WHERE en.id::text = ANY($1) AND en.circuit_state <> 'closed'
		  AND EXISTS (SELECT 1 FROM deliveries d WHERE d.endpoint_id = en.id AND d.status IN ('pending','failed'))`, ids)
	if err != nil {
		return nil, fmt.Errorf("blocked circuits: %w", err)
	}
	blocked, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("blocked circuits: %w", err)
	}
	names := map[string]string{}
	for name, id := range e.EndpointIDs {
		names[id] = name
	}
	for i, id := range blocked {
		blocked[i] = names[id]
	}
	return blocked, nil
}

func opEventIDs(ctx context.Context, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) ([]string, error) {
	rows, err := db.Query(ctx, `SELECT id::text FROM events WHERE type LIKE 'sluice.%'`)
	if err != nil {
		return nil, fmt.Errorf("operational events: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("operational events: %w", err)
	}
	return ids, nil
}

// OpFigures are what the reconciliation of transitions and operational
// events found. A "mismatch" names an endpoint or delivery whose stored
// transitions and events disagree.
type OpFigures struct {
	// Circuits: alerts rows (emails) of circuit_opened and circuit_closed, and
	// the events (opened; closed after a probe and by hand).
	OpenAlerts, CloseAlerts          int
	Opened, ClosedProbe, ClosedHand  int
	CircuitMismatch, StateMismatch   []string
	OpenAtEnd                        []string // endpoints whose circuit is open at the end
	Disabled                         map[string]int
	DisabledEvents, DisabledAlerts   int
	DisabledMismatch                 []string
	Dead, DeadEvents                 int // dead deliveries of tenants' events; sluice.delivery.dead events
	DeadOps                          int // dead deliveries of operational events (never reported)
	DeadMismatch                     []string
	OpEvents                         map[string]int // every operational event, by type
	Received, Unsigned, WrongType    int            // operational events at the ops endpoint
	OpDuplicates, NotOps             int            // receipts beyond the first; tenants' events at a sluice.* endpoint
	OpMissing                        []string
	LeakedReceipts, LeakedDeliveries int // sluice.* at endpoints subscribed to *
	// Unsettled counts accepted events at a flap or picky endpoint (and
	// operational events at opsfail) without a delivery that is delivered
	// or dead, or, at a picky endpoint, dead but not refused or delivered
	// though refused; Unreceived, deliveries recorded delivered that the
	// receiver never got.
	Unsettled, Unreceived int
	Samples               []string
	// Drain is how long the queues took to drain after the healthy
	// endpoints had every event; Outstanding what was left, if not.
	Drain       time.Duration
	Outstanding string
}

func (f *OpFigures) sample(format string, args ...any) {
	if len(f.Samples) < 10 {
		f.Samples = append(f.Samples, fmt.Sprintf(format, args...))
	}
}

// ReconcileOps reads, in one snapshot, what Postgres stored of the
// transitions (alerts, endpoints, dead deliveries) and the
// operational events, and matches them with each other and with what the
// receiver got. accepted are the accepted events' ids.
func ReconcileOps(ctx context.Context, e *Env, eps []EndpointSpec, accepted []string) (OpFigures, error) {
	f := OpFigures{Disabled: map[string]int{}, OpEvents: map[string]int{}}
	tx, err := e.DB.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return f, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	names := map[string]string{} // endpoint id → name
	for name, id := range e.EndpointIDs {
		names[id] = name
	}
	if err := f.circuitsAndDisabling(ctx, tx, names); err != nil {
		return f, err
	}
	if err := f.deadLetters(ctx, tx); err != nil {
		return f, err
	}
	if err := f.arrivals(ctx, tx, e); err != nil {
		return f, err
	}
	return f, f.outcomes(ctx, tx, e, eps, accepted)
}

// key is an endpoint's count of one kind of alert or event.
type key struct{ endpoint, kind string }

// circuitsAndDisabling matches, per endpoint, alerts rows with
// circuit_opened/closed events, the circuit's state with them, and each
// endpoint Sluice disabled with its one alert and one event.
func (f *OpFigures) circuitsAndDisabling(ctx context.Context, tx pgx.Tx, names map[string]string) error {
	counts := map[key]int{}
	rows, err := tx.Query(ctx, `
		SELECT endpoint_id::text, CASE event_type
		           WHEN 'sluice.endpoint.disabled' THEN 'disabled:' || coalesce(payload->>'reason', '')
		           WHEN 'sluice.endpoint.circuit_opened' THEN 'opened'
		           WHEN 'sluice.endpoint.circuit_closed' THEN 'closed'
		           ELSE event_type END, count(*)::int
		FROM alerts GROUP BY 1, 2
		UNION ALL
		SELECT payload->>'endpoint_id', type || ':' || coalesce(payload->>'reason', ''), count(*)::int
		FROM events WHERE type LIKE 'sluice.endpoint.%' GROUP BY 1, 2`)
	if err != nil {
		return fmt.Errorf("alerts and endpoint events: %w", err)
	}
	type count struct {
		Endpoint, Kind string
		N              int
	}
	cs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[count])
	if err != nil {
		return fmt.Errorf("alerts and endpoint events: %w", err)
	}
	for _, c := range cs {
		counts[key{c.Endpoint, c.Kind}] += c.N
	}
	rows, err = tx.Query(ctx, `SELECT id::text, circuit_state, coalesce(disabled_reason, '') FROM endpoints`)
	if err != nil {
		return fmt.Errorf("endpoints: %w", err)
	}
	type endpoint struct{ ID, State, Disabled string }
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[endpoint])
	if err != nil {
		return fmt.Errorf("endpoints: %w", err)
	}
	known := map[string]bool{}
	for _, ep := range all {
		known[ep.ID] = true
		name, n := names[ep.ID], func(kind string) int { return counts[key{ep.ID, kind}] }
		opened := n("sluice.endpoint.circuit_opened:failures")
		closed := n("sluice.endpoint.circuit_closed:probe_succeeded") + n("sluice.endpoint.circuit_closed:manual")
		f.OpenAlerts += n("opened")
		f.CloseAlerts += n("closed")
		f.Opened += opened
		f.ClosedProbe += n("sluice.endpoint.circuit_closed:probe_succeeded")
		f.ClosedHand += n("sluice.endpoint.circuit_closed:manual")
		if n("opened") != opened || n("closed") != closed {
			f.CircuitMismatch = append(f.CircuitMismatch, fmt.Sprintf("%s: alerts opened %d closed %d, events opened %d closed %d",
				name, n("opened"), n("closed"), opened, closed))
		}
		// A circuit opens only when closed and closes only when open.
		open := 0
		if ep.State != "closed" {
			open = 1
			f.OpenAtEnd = append(f.OpenAtEnd, name)
		}
		if opened-closed != open {
			f.StateMismatch = append(f.StateMismatch, fmt.Sprintf("%s: %s after %d opened, %d closed", name, ep.State, opened, closed))
		}
		// Sluice disables (gone, failing) with one alert and one event;
		// nothing in this scenario disables by hand.
		var alerts, events int
		for _, reason := range []string{"gone", "failing", "manual"} {
			alerts += n("disabled:" + reason)
			events += n("sluice.endpoint.disabled:" + reason)
		}
		f.DisabledAlerts += alerts
		f.DisabledEvents += events
		want := 0
		if ep.Disabled != "" {
			f.Disabled[ep.Disabled]++
			want = 1
		}
		if alerts != want || events != want || want == 1 && (n("disabled:"+ep.Disabled) != 1 || n("sluice.endpoint.disabled:"+ep.Disabled) != 1) {
			f.DisabledMismatch = append(f.DisabledMismatch, fmt.Sprintf("%s: disabled %q, %d alerts, %d events", name, ep.Disabled, alerts, events))
		}
		if strings.HasPrefix(name, gonePrefix) && ep.Disabled != "gone" {
			f.DisabledMismatch = append(f.DisabledMismatch, fmt.Sprintf("%s answered 410 but is disabled %q", name, ep.Disabled))
		}
		if n("sluice.endpoint.enabled:manual") != 0 {
			f.DisabledMismatch = append(f.DisabledMismatch, fmt.Sprintf("%s: enabled, though nobody enabled it", name))
		}
	}
	for k := range counts {
		if !known[k.endpoint] {
			f.CircuitMismatch = append(f.CircuitMismatch, fmt.Sprintf("%s about an unknown endpoint %s", k.kind, k.endpoint))
		}
	}
	slices.Sort(f.CircuitMismatch)
	return nil
}

// deadLetters matches every dead delivery of a tenant's event with exactly
// one sluice.delivery.dead event naming it (its endpoint, its event), and
// every such event with a dead delivery.
func (f *OpFigures) deadLetters(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `
		SELECT id::text, endpoint_id::text || ' ' || event_id::text || ' ' || event_type FROM deliveries
		WHERE status = 'dead' AND event_type NOT LIKE 'sluice.%'`)
	if err != nil {
		return fmt.Errorf("dead deliveries: %w", err)
	}
	type named struct{ ID, What string }
	dead, err := pgx.CollectRows(rows, pgx.RowToStructByPos[named])
	if err != nil {
		return fmt.Errorf("dead deliveries: %w", err)
	}
	rows, err = tx.Query(ctx, `
		SELECT coalesce(payload->>'delivery_id', ''),
		       coalesce(payload->>'endpoint_id', '') || ' ' || coalesce(payload->>'event_id', '') || ' ' || coalesce(payload->>'event_type', '')
		FROM events WHERE type = 'sluice.delivery.dead'`)
	if err != nil {
		return fmt.Errorf("dead letter events: %w", err)
	}
	evs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[named])
	if err != nil {
		return fmt.Errorf("dead letter events: %w", err)
	}
	f.Dead, f.DeadEvents = len(dead), len(evs)
	err = tx.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE status = 'dead' AND event_type LIKE 'sluice.%'`).Scan(&f.DeadOps)
	if err != nil {
		return fmt.Errorf("dead deliveries of operational events: %w", err)
	}
	byDelivery := map[string][]string{} // delivery id → what its events say
	for _, ev := range evs {
		byDelivery[ev.ID] = append(byDelivery[ev.ID], ev.What)
	}
	for _, d := range dead {
		got := byDelivery[d.ID]
		delete(byDelivery, d.ID)
		if len(got) != 1 || got[0] != d.What {
			f.DeadMismatch = append(f.DeadMismatch, fmt.Sprintf("dead delivery %s (%s): events %q", d.ID, d.What, got))
		}
	}
	for id, got := range byDelivery {
		f.DeadMismatch = append(f.DeadMismatch, fmt.Sprintf("sluice.delivery.dead about %s, not a dead delivery of a tenant's event: %q", id, got))
	}
	slices.Sort(f.DeadMismatch)
	return nil
}

// arrivals: every operational event at the ops endpoint, with its type;
// everything at the sluice.* endpoints signed and operational; nothing
// operational at the endpoints subscribed to *.
func (f *OpFigures) arrivals(ctx context.Context, tx pgx.Tx, e *Env) error {
	rows, err := tx.Query(ctx, `SELECT id::text, type FROM events WHERE type LIKE 'sluice.%'`)
	if err != nil {
		return fmt.Errorf("operational events: %w", err)
	}
	type event struct{ ID, Type string }
	evs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[event])
	if err != nil {
		return fmt.Errorf("operational events: %w", err)
	}
	types := map[string]string{}
	for _, ev := range evs {
		types[ev.ID] = ev.Type
		f.OpEvents[ev.Type]++
	}
	got := map[string]Receipt{} // at ops
	for _, r := range e.Receiver.Receipts() {
		isOp := strings.HasPrefix(r.Type, "sluice.")
		switch {
		case r.Endpoint != opsEndpoint && r.Endpoint != opsFailing:
			if isOp {
				f.LeakedReceipts++
				f.sample("%s received %s %s", r.Endpoint, r.Type, r.ID)
			}
		case !isOp:
			f.NotOps++
		case !r.Signed:
			f.Unsigned++
		}
		if r.Endpoint != opsEndpoint || !isOp {
			continue
		}
		if _, dup := got[r.ID]; dup {
			f.OpDuplicates++
			continue
		}
		got[r.ID] = r
	}
	for _, id := range slices.Sorted(maps.Keys(types)) {
		r, ok := got[id]
		switch {
		case !ok:
			if len(f.OpMissing) < 10 {
				f.OpMissing = append(f.OpMissing, types[id]+" "+id)
			}
			continue
		case r.Type != types[id]:
			f.WrongType++
		}
		f.Received++
	}
	subscribed := []string{e.EndpointIDs[opsEndpoint], e.EndpointIDs[opsFailing]}
	err = tx.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE event_type LIKE 'sluice.%' AND NOT endpoint_id::text = ANY($1)`, subscribed).
		Scan(&f.LeakedDeliveries)
	if err != nil {
		return fmt.Errorf("deliveries of operational events: %w", err)
	}
	return nil
}

// outcomes: at the flap and picky endpoints, every accepted event's
// delivery is delivered or dead, and so is every operational event's at
// opsfail (at a picky endpoint, dead exactly when it refuses the event);
// and every delivery recorded delivered, anywhere, was received.
func (f *OpFigures) outcomes(ctx context.Context, tx pgx.Tx, e *Env, eps []EndpointSpec, accepted []string) error {
	rows, err := tx.Query(ctx, `SELECT endpoint_id::text, event_id::text, status FROM deliveries WHERE replayed_from IS NULL`)
	if err != nil {
		return fmt.Errorf("deliveries: %w", err)
	}
	type delivery struct{ Endpoint, Event, Status string }
	ds, err := pgx.CollectRows(rows, pgx.RowToStructByPos[delivery])
	if err != nil {
		return fmt.Errorf("deliveries: %w", err)
	}
	status := map[pair]string{}
	for _, d := range ds {
		status[pair{d.Endpoint, d.Event}] = d.Status
	}
	received := map[pair]bool{}
	for _, r := range e.Receiver.Receipts() {
		received[pair{e.EndpointIDs[r.Endpoint], r.ID}] = true
	}
	for _, d := range ds {
		if d.Status == "delivered" && !received[pair{d.Endpoint, d.Event}] {
			f.Unreceived++
			f.sample("delivery of %s to %s recorded delivered, never received", d.Event, d.Endpoint)
		}
	}
	ops, err := opEventIDs(ctx, tx)
	if err != nil {
		return err
	}
	for _, ep := range eps {
		flap, picky := strings.HasPrefix(ep.Name, flapPrefix), strings.HasPrefix(ep.Name, pickyPrefix)
		ids := accepted
		switch {
		case ep.Name == opsFailing:
			ids = ops
		case !flap && !picky:
			continue
		}
		for _, id := range ids {
			st := status[pair{e.EndpointIDs[ep.Name], id}]
			ok := st == "delivered" || st == "dead"
			if ep.Mode == ModePicky && ok && (st == "dead") != Picky(id) {
				ok = false
			}
			if !ok {
				f.Unsettled++
				f.sample("%s at %s: %q", id, ep.Name, st)
			}
		}
	}
	return nil
}

// checks are the transitions scenario's: every pairing exact.
func (f OpFigures) checks() []Check {
	var cs []Check
	add := func(name string, pass bool, format string, args ...any) {
		cs = append(cs, Check{Name: name, Value: fmt.Sprintf(format, args...), Pass: pass})
	}
	add("queues drained, every operational event received", f.Outstanding == "", "%s%s", secs(f.Drain), suffix(f.Outstanding))
	add("every kind of transition happened",
		f.Opened > 0 && f.ClosedProbe > 0 && f.ClosedHand > 0 && f.Disabled["gone"] > 0 && f.Dead > 0 && f.DeadOps > 0,
		"%d opened, %d closed by a probe, %d by hand, %d disabled gone, %d dead (and %d of operational events)",
		f.Opened, f.ClosedProbe, f.ClosedHand, f.Disabled["gone"], f.Dead, f.DeadOps)
	add("circuit alerts = circuit events, per endpoint", len(f.CircuitMismatch) == 0,
		"opened %d alerts/%d events, closed %d/%d%s", f.OpenAlerts, f.Opened, f.CloseAlerts, f.ClosedProbe+f.ClosedHand, listed(f.CircuitMismatch))
	add("every circuit's state = its opened − closed events", len(f.StateMismatch) == 0,
		"open at the end: %s%s", names(f.OpenAtEnd), listed(f.StateMismatch))
	add("each disabled endpoint: one alert, one sluice.endpoint.disabled", len(f.DisabledMismatch) == 0,
		"%s; %d alerts, %d events%s", statuses(f.Disabled), f.DisabledAlerts, f.DisabledEvents, listed(f.DisabledMismatch))
	add("each dead delivery: one sluice.delivery.dead naming it", len(f.DeadMismatch) == 0,
		"%d dead, %d events; %d dead deliveries of operational events, none reported%s", f.Dead, f.DeadEvents, f.DeadOps, listed(f.DeadMismatch))
	total := 0
	for _, n := range f.OpEvents {
		total += n
	}
	add("every operational event at the healthy sluice.* endpoint; all signed", f.Received == total && f.Unsigned == 0 && f.WrongType == 0 && f.NotOps == 0,
		"%d/%d, %d of another type; %d receipts at sluice.* endpoints unsigned, %d of tenants' events%s",
		f.Received, total, f.WrongType, f.Unsigned, f.NotOps, listed(f.OpMissing))
	add("no sluice.* at endpoints subscribed to *", f.LeakedReceipts == 0 && f.LeakedDeliveries == 0,
		"%d received, %d deliveries", f.LeakedReceipts, f.LeakedDeliveries)
	add("failing endpoints: every event delivered or dead as its receiver answered", f.Unsettled == 0, "%d not", f.Unsettled)
	add("every delivery recorded delivered was received", f.Unreceived == 0, "%d not", f.Unreceived)
	return cs
}

// write prints the figures for WriteDetail.
func (f OpFigures) write(w io.Writer) {
	fmt.Fprintf(w, "  transitions: circuits opened %d, closed %d by a probe and %d by hand (open at the end: %s); endpoints disabled %s; deliveries dead %d, and %d of operational events\n",
		f.Opened, f.ClosedProbe, f.ClosedHand, names(f.OpenAtEnd), statuses(f.Disabled), f.Dead, f.DeadOps)
	fmt.Fprintf(w, "  operational events %s; at the sluice.* endpoint %d (duplicates %d); queues drained %s after the healthy endpoints\n",
		statuses(f.OpEvents), f.Received, f.OpDuplicates, secs(f.Drain))
	for _, s := range f.Samples {
		fmt.Fprintf(w, "  op: %s\n", s)
	}
}

func names(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, " ")
}

func listed(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	return "; " + strings.Join(xs[:min(len(xs), 5)], "; ")
}

func suffix(s string) string {
	if s == "" {
		return ""
	}
	return ", still " + s
}

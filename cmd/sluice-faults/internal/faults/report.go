package faults

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Result is one scenario's figures, checks and verdict.
type Result struct {
	Name, Title    string
	Dir            string // logs: api.log, workerN.log, receiver.log, db-samples.log
	Figures        Figures
	DB             DBState
	Faults         []Fault
	MaxRSS         int64
	PoisonStatuses map[string]int // the poisoning tenant's answers
	PoisonByKind   map[string]map[string]int
	// Ops, for a scenario with OpEvents, is the reconciliation of
	// transitions and operational events.
	Ops    *OpFigures
	Checks []Check
	Notes  []string
	Pass   bool
	Wall   time.Duration
	exits  int
}

// Check is one bound and what was measured against it.
type Check struct {
	Name  string
	Value string
	Pass  bool
}

// asyncWindow is how much of its most recent work a Postgres that stops
// at once (a crash, or a failover to a standby) can lose of what was
// committed asynchronously: three wal_writer_delays at the default 200 ms.
// Dispatch records attempts that way (docs/architecture.md), so the
// deliveries recorded in that window are sent again.
const asyncWindow = 600 * time.Millisecond

// DupBound is the duplicates allowed: every delivery in flight at each
// fault, at most max_in_flight per endpoint on each worker, and, when the
// fault stops Postgres at once, the deliveries recorded in its last
// asyncWindow.
func (sc Scenario) DupBound(faults int) int {
	perFault := MaxInFlight * Workers * sc.Healthy
	if sc.Bounds.AsyncLoss {
		perFault += int(math.Ceil(sc.Rate * float64(sc.Healthy) * asyncWindow.Seconds()))
	}
	return perFault * max(faults, 1)
}

func (sc Scenario) check(r Result) []Check {
	f := r.Figures
	b := sc.Bounds
	var cs []Check
	add := func(name string, pass bool, format string, args ...any) {
		cs = append(cs, Check{Name: name, Value: fmt.Sprintf(format, args...), Pass: pass})
	}
	add("lost = 0", f.Lost == 0, "%d", f.Lost)
	bound := sc.DupBound(len(r.Faults))
	add(fmt.Sprintf("duplicates ≤ %d", bound), f.Duplicates <= bound, "%d", f.Duplicates)
	add(fmt.Sprintf("endpoint stall ≤ %s", b.Stall), f.MaxStall <= b.Stall, "%s", secs(f.MaxStall))
	if b.PGBack > 0 {
		add(fmt.Sprintf("first delivery after postgres back ≤ %s", b.PGBack), f.FirstAfterPG <= b.PGBack, "%s", secs(f.FirstAfterPG))
		add(fmt.Sprintf("every endpoint served after postgres back ≤ %s", b.PGServeAll), f.ServeAllAfterPG <= b.PGServeAll, "%s", secs(f.ServeAllAfterPG))
	}
	other5xx := 0
	for k, n := range f.Statuses {
		if strings.HasPrefix(k, "5") && k != "503" {
			other5xx += n
		}
	}
	if b.OutageAnswer > 0 {
		add(fmt.Sprintf("posts during the outage answered ≤ %s", b.OutageAnswer),
			f.OutageStatuses["err"] == 0 && f.OutageSlowest <= b.OutageAnswer,
			"%d attempts (%s), slowest %s", f.OutageAttempts, statuses(f.OutageStatuses), secs(f.OutageSlowest))
	}
	if b.AcceptBack > 0 {
		add(fmt.Sprintf("a post accepted after postgres back ≤ %s", b.AcceptBack), f.AcceptAfterPG <= b.AcceptBack, "%s", secs(f.AcceptAfterPG))
	}
	if b.No503 {
		add("no 5xx", other5xx+f.Statuses["503"] == 0, "%d", other5xx+f.Statuses["503"])
	} else {
		add("no 5xx but 503", other5xx == 0, "%d", other5xx)
	}
	if !b.ConnErrors {
		add("every post answered", f.Statuses["err"] == 0, "%d unanswered", f.Statuses["err"])
	}
	if sc.Poison > 0 {
		failed := f.Posted - f.Accepted
		add("victim: 0 failed posts", failed == 0, "%d", failed)
		not4xx := 0
		for k, n := range r.PoisonStatuses {
			if !strings.HasPrefix(k, "4") {
				not4xx += n
			}
		}
		add("poisoner: only 4xx", not4xx == 0, "%d not 4xx", not4xx)
	}
	if sc.OpEvents {
		if r.Ops == nil {
			add("operational events reconciled", false, "not read (see the notes)")
		} else {
			cs = append(cs, r.Ops.checks()...)
		}
	}
	add("nothing stuck in the database", r.DB.Stuck == 0 && r.DB.Unfanned == 0,
		"%d due without a dispatch job, %d events without fan-out", r.DB.Stuck, r.DB.Unfanned)
	add("no process exited by itself", r.exits == 0, "%d", r.exits)
	return cs
}

// Failed lists the checks that failed.
func (r Result) Failed() []Check {
	var out []Check
	for _, c := range r.Checks {
		if !c.Pass {
			out = append(out, c)
		}
	}
	return out
}

// WriteDetail prints one scenario's figures, checks and notes.
func (r Result) WriteDetail(w io.Writer) {
	f := r.Figures
	verdict := "PASS"
	if !r.Pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "\n== %s — %s: %s (%s)\n", r.Name, r.Title, verdict, r.Wall.Round(time.Second))
	fmt.Fprintf(w, "  posts %d, accepted %d; statuses %s\n", f.Posted, f.Accepted, statuses(f.Statuses))
	if r.PoisonStatuses != nil {
		fmt.Fprintf(w, "  poisoning tenant's statuses %s\n", statuses(r.PoisonStatuses))
		for _, k := range slices.Sorted(maps.Keys(r.PoisonByKind)) {
			fmt.Fprintf(w, "    %s: %s\n", k, statuses(r.PoisonByKind[k]))
		}
	}
	fmt.Fprintf(w, "  deliveries expected %d, delivered %d, lost %d, duplicates %d, received but never accepted %d\n",
		f.Expected, f.Delivered, f.Lost, f.Duplicates, f.Unacked)
	fmt.Fprintf(w, "  settle %s, longest endpoint stall %s (%s), latency p50 %s p99 %s, max worker RSS %.0f MB\n",
		settle(f.Settle), secs(f.MaxStall), f.StallAt, secs(f.LatencyP50), secs(f.LatencyP99), float64(r.MaxRSS)/(1<<20))
	if !f.NoDeliveryAt.IsZero() {
		fmt.Fprintf(w, "  longest time without any delivery %s (from %s)\n", secs(f.NoDelivery), f.NoDeliveryAt.Format("15:04:05.000"))
	}
	if f.Recoveries > 0 {
		fmt.Fprintf(w, "  postgres recoveries %d: first delivery after %s, every endpoint served after %s, a post accepted after %s\n",
			f.Recoveries, secs(f.FirstAfterPG), secs(f.ServeAllAfterPG), secs(f.AcceptAfterPG))
		fmt.Fprintf(w, "  post attempts during the outages: %d (%s), slowest answer %s\n",
			f.OutageAttempts, statuses(f.OutageStatuses), secs(f.OutageSlowest))
	}
	if r.Ops != nil {
		r.Ops.write(w)
	}
	for _, ft := range r.Faults {
		fmt.Fprintf(w, "  fault: %s at %s for %s\n", ft.Kind, ft.At.Format("15:04:05.000"), ft.End.Sub(ft.At).Round(time.Millisecond))
	}
	fmt.Fprintf(w, "  database at the end: %d queued to healthy endpoints, %d stuck, %d unfanned; River jobs %s\n",
		r.DB.Queued, r.DB.Stuck, r.DB.Unfanned, r.DB.Jobs)
	for _, s := range r.DB.StuckSample {
		fmt.Fprintf(w, "  stuck: %s\n", s)
	}
	if len(f.LostSample) > 0 {
		fmt.Fprintf(w, "  lost (event@endpoint): %s\n", strings.Join(f.LostSample, " "))
	}
	for _, c := range r.Checks {
		mark := "ok  "
		if !c.Pass {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  [%s] %s: %s\n", mark, c.Name, c.Value)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	fmt.Fprintf(w, "  logs: %s\n", r.Dir)
}

// WriteTable prints one row per scenario (Markdown).
func WriteTable(w io.Writer, rs []Result) {
	fmt.Fprintln(w, "| scenario | accepted | delivered | lost | dups | settle | max stall | first after PG | all served after PG | max worker RSS | post statuses | verdict |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
	for _, r := range rs {
		f := r.Figures
		pgFirst, pgAll := "—", "—"
		if f.Recoveries > 0 {
			pgFirst, pgAll = secs(f.FirstAfterPG), secs(f.ServeAllAfterPG)
		}
		verdict := "PASS"
		if !r.Pass {
			var names []string
			for _, c := range r.Failed() {
				names = append(names, c.Name)
			}
			verdict = "FAIL: " + strings.Join(names, "; ")
		}
		st := statuses(f.Statuses)
		if r.PoisonStatuses != nil {
			st += "; poisoner " + statuses(r.PoisonStatuses)
		}
		fmt.Fprintf(w, "| %s | %d/%d | %d/%d | %d | %d | %s | %s | %s | %s | %.0f MB | %s | %s |\n",
			r.Name, f.Accepted, f.Posted, f.Delivered, f.Expected, f.Lost, f.Duplicates, settle(f.Settle),
			secs(f.MaxStall), pgFirst, pgAll, float64(r.MaxRSS)/(1<<20), st, verdict)
	}
}

func statuses(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"×"+strconv.Itoa(m[k]))
	}
	return strings.Join(parts, " ")
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

func settle(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return secs(d)
}

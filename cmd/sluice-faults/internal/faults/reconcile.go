package faults

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Fault is one injected fault: it began at At and was over (process
// restarted, Postgres accepting connections again) at End.
type Fault struct {
	Kind string
	At   time.Time
	End  time.Time
	// Outage marks faults during which nothing can be delivered at all
	// (Postgres down or paused): stall figures do not count that time.
	Outage bool
}

// Figures are what the reconciliation of posts, receipts and faults found.
type Figures struct {
	Posted, Accepted int
	// Statuses counts every attempt's outcome, retries included; Retries
	// counts the attempts that were retried.
	Statuses   map[string]int
	Retries    int
	Expected   int // accepted events × healthy endpoints
	Delivered  int // of those, received at least once
	Lost       int
	LostSample []string // "event-id@endpoint"
	Duplicates int      // receipts beyond the first of an (event, endpoint)
	Unacked    int      // events received that were never answered 2xx
	// Settle is from the end of the last fault (or of the load, if later)
	// to the first receipt of the last expected delivery (negative: not
	// settled).
	Settle time.Duration
	// MaxStall is the longest time an endpoint with deliveries outstanding
	// (accepted, not yet received) went without receiving anything, not
	// counting Postgres outages; StallAt says which endpoint and when.
	MaxStall time.Duration
	StallAt  string
	// FirstAfterPG is, over Postgres recoveries, the longest wait from
	// Postgres back to the first delivery anywhere; ServeAllAfterPG the
	// longest until every endpoint with deliveries outstanding got one.
	FirstAfterPG, ServeAllAfterPG time.Duration
	Recoveries                    int
	LatencyP50, LatencyP99        time.Duration // post sent → first receipt
	// OutageAttempts counts the post attempts in flight during a Postgres
	// outage (sent before it ended, answered after it began), by outcome
	// in OutageStatuses; OutageSlowest is the longest any of them took to
	// be answered (or to fail).
	OutageAttempts int
	OutageStatuses map[string]int
	OutageSlowest  time.Duration
	// AcceptAfterPG is, over Postgres recoveries, the longest wait from
	// Postgres back to a post answered 2xx.
	AcceptAfterPG time.Duration
	// NoDelivery is the longest time no healthy endpoint received
	// anything, between the first receipt and the last, outages counted:
	// under a steady load, the time a fault left Sluice without
	// deliveries. NoDeliveryAt is when it began.
	NoDelivery   time.Duration
	NoDeliveryAt time.Time
}

type pair struct{ endpoint, id string }

// Reconcile compares what was accepted with what the healthy endpoints
// received. end is when the suite stopped waiting; settleFrom is the end of
// the last fault (or of the load, when it ended later).
func Reconcile(posts []Post, receipts []Receipt, healthy []string, faults []Fault, end, settleFrom time.Time) Figures {
	f := Figures{Statuses: map[string]int{}}
	accepted := map[string]time.Time{} // event id → when it was sent
	acceptedAt := map[string]time.Time{}
	for _, p := range posts {
		if p.Sent.IsZero() {
			continue
		}
		f.Posted++
		f.Statuses[p.StatusKey()]++
		for _, k := range p.Retried {
			f.Statuses[k]++
			f.Retries++
		}
		if p.Accepted() && p.EventID != "" {
			accepted[p.EventID] = p.Sent
			acceptedAt[p.EventID] = p.Done
		}
	}
	f.Accepted = len(accepted)
	isHealthy := map[string]bool{}
	for _, h := range healthy {
		isHealthy[h] = true
	}
	slices.SortFunc(receipts, func(a, b Receipt) int { return a.At.Compare(b.At) })
	first := map[pair]time.Time{}
	unacked := map[string]bool{}
	var prev time.Time
	for _, r := range receipts {
		if !isHealthy[r.Endpoint] {
			continue
		}
		if !prev.IsZero() && r.At.Sub(prev) > f.NoDelivery {
			f.NoDelivery, f.NoDeliveryAt = r.At.Sub(prev), prev
		}
		prev = r.At
		k := pair{r.Endpoint, r.ID}
		if _, seen := first[k]; seen {
			f.Duplicates++
			continue
		}
		first[k] = r.At
		if _, ok := accepted[r.ID]; !ok {
			unacked[r.ID] = true
		}
	}
	f.Unacked = len(unacked)

	var lastFirst time.Time
	var latencies []time.Duration
	for id, sent := range accepted {
		for _, h := range healthy {
			f.Expected++
			at, ok := first[pair{h, id}]
			if !ok {
				f.Lost++
				if len(f.LostSample) < 20 {
					f.LostSample = append(f.LostSample, id+"@"+h)
				}
				continue
			}
			f.Delivered++
			latencies = append(latencies, at.Sub(sent))
			if at.After(lastFirst) {
				lastFirst = at
			}
		}
	}
	slices.Sort(latencies)
	f.LatencyP50, f.LatencyP99 = quantile(latencies, 0.50), quantile(latencies, 0.99)

	switch {
	case f.Lost > 0:
		f.Settle = -1
	case lastFirst.Before(settleFrom):
		f.Settle = 0
	default:
		f.Settle = lastFirst.Sub(settleFrom)
	}

	// Per endpoint: when each outstanding pair was accepted and first
	// received, and every receipt.
	for _, h := range healthy {
		type ev struct {
			at   time.Time
			kind int // 0 receipt, 1 accept, 2 receipt that ends an outstanding pair
		}
		var evs []ev
		for id, at := range acceptedAt {
			r, ok := first[pair{h, id}]
			if ok && !r.After(at) {
				continue // received before the 202 came back: never outstanding
			}
			evs = append(evs, ev{at, 1})
			if ok {
				evs = append(evs, ev{r, 2})
			}
		}
		for _, r := range receipts {
			if r.Endpoint == h {
				if fr := first[pair{h, r.ID}]; !fr.Equal(r.At) || !acceptedBefore(acceptedAt, r.ID, r.At) {
					evs = append(evs, ev{r.At, 0})
				}
			}
		}
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
		out, since := 0, time.Time{}
		gap := func(t time.Time) {
			if d := t.Sub(since) - overlap(faults, since, t); d > f.MaxStall {
				f.MaxStall = d
				f.StallAt = fmt.Sprintf("%s from %s", h, since.Format("15:04:05.000"))
			}
		}
		for _, e := range evs {
			switch e.kind {
			case 1:
				if out == 0 {
					since = e.at
				}
				out++
			default:
				if out > 0 {
					gap(e.at)
				}
				since = e.at
				if e.kind == 2 {
					out--
				}
			}
		}
		if out > 0 {
			gap(end)
		}
	}

	// Posts during and after Postgres outages.
	f.OutageStatuses = map[string]int{}
	for _, p := range posts {
		for _, a := range p.Attempts {
			for _, ft := range faults {
				if !ft.Outage || !a.Sent.Before(ft.End) || !a.Done.After(ft.At) {
					continue
				}
				f.OutageAttempts++
				f.OutageStatuses[Post{Status: a.Status}.StatusKey()]++
				f.OutageSlowest = max(f.OutageSlowest, a.Done.Sub(a.Sent))
				break
			}
		}
	}
	for _, ft := range faults {
		if !ft.Outage {
			continue
		}
		first := end
		for _, p := range posts {
			for _, a := range p.Attempts {
				if a.Status/100 == 2 && a.Done.After(ft.End) && a.Done.Before(first) {
					first = a.Done
				}
			}
		}
		f.AcceptAfterPG = max(f.AcceptAfterPG, first.Sub(ft.End)-overlap(faults, ft.End, first))
	}

	// Recoveries of Postgres.
	for _, ft := range faults {
		if !ft.Outage {
			continue
		}
		b := ft.End
		f.Recoveries++
		var firstAny time.Time
		for _, r := range receipts {
			if isHealthy[r.Endpoint] && r.At.After(b) {
				firstAny = r.At
				break
			}
		}
		if firstAny.IsZero() {
			firstAny = end
		}
		f.FirstAfterPG = max(f.FirstAfterPG, firstAny.Sub(b)-overlap(faults, b, firstAny))
		for _, h := range healthy {
			outstanding := false
			for id, at := range acceptedAt {
				if r, ok := first[pair{h, id}]; at.Before(b) && (!ok || r.After(b)) {
					outstanding = true
					break
				}
			}
			if !outstanding {
				continue
			}
			served := end
			for _, r := range receipts {
				if r.Endpoint == h && r.At.After(b) {
					served = r.At
					break
				}
			}
			f.ServeAllAfterPG = max(f.ServeAllAfterPG, served.Sub(b)-overlap(faults, b, served))
		}
	}
	return f
}

// acceptedBefore reports whether id's 202 came back before t.
func acceptedBefore(acceptedAt map[string]time.Time, id string, t time.Time) bool {
	at, ok := acceptedAt[id]
	return ok && at.Before(t)
}

// overlap is how much of [from, to] Postgres outages cover.
func overlap(faults []Fault, from, to time.Time) time.Duration {
	var d time.Duration
	for _, ft := range faults {
		if !ft.Outage {
			continue
		}
		s, e := maxTime(ft.At, from), minTime(ft.End, to)
		if e.After(s) {
			d += e.Sub(s)
		}
	}
	return d
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

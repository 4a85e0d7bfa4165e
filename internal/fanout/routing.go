package fanout

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/secretbox"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// routes are the subscriptions a group of one tenant's events can reach,
// by the consumer their endpoint belongs to ("" for the tenant's own). The
// routing rule lives here and nowhere else: an event addressed to a
// consumer reaches only that consumer's endpoints, an event without one
// only the tenant's own, and a broadcast every endpoint. An operational
// event (a type of Sluice's own) about a consumer's endpoint is addressed
// to that consumer and reaches the tenant's own endpoints too: the tenant
// hears about every endpoint, a consumer only about its own.
//
// A subscription with a filter is reached only by the events whose payload
// matches it: Postgres evaluates the filters of the subscriptions each
// event may reach, by type and routing rule, in one query (applyFilters),
// as InsertRoutedEvents does in its own statement.
type routes struct {
	byConsumer map[string][]dbq.SubscriptionsForEventsRow
	passed     map[eventSubscription]bool // the filters that matched
}

type eventSubscription struct{ event, subscription uuid.UUID }

// loadRoutes loads, with one query, the subscriptions evs can reach.
// With a limit (0: none), it answers errOverLimit instead when evs could
// make more than limit deliveries, counted before filtering, so that
// neither the filters nor the plan are worked out for events that will go
// to a fan-out job.
func loadRoutes(ctx context.Context, q *dbq.Queries, pl *secretbox.Payloads, tenantID uuid.UUID, evs []dbq.Event, limit int) (routes, error) {
	params := dbq.SubscriptionsForEventsParams{TenantID: tenantID, Consumers: []string{}}
	seen, seenType := map[string]bool{}, map[string]bool{}
	for _, ev := range evs {
		if !seenType[ev.Type] {
			seenType[ev.Type] = true
			params.Patterns = append(params.Patterns, sluice.CandidatePatterns(ev.Type)...)
		}
		switch {
		case ev.Broadcast:
			params.Broadcast = true
		case ev.Consumer == nil:
			params.Own = true
		default:
			if sluice.IsReservedType(ev.Type) {
				params.Own = true
			}
			if !seen[*ev.Consumer] {
				seen[*ev.Consumer] = true
				params.Consumers = append(params.Consumers, *ev.Consumer)
			}
		}
	}
	rows, err := q.SubscriptionsForEvents(ctx, params)
	if err != nil {
		return routes{}, fmt.Errorf("route events: %w", err)
	}
	r := routes{byConsumer: map[string][]dbq.SubscriptionsForEventsRow{}, passed: map[eventSubscription]bool{}}
	filtered := false
	for _, row := range rows {
		key := ""
		if row.Consumer != nil {
			key = *row.Consumer
		}
		r.byConsumer[key] = append(r.byConsumer[key], row)
		filtered = filtered || row.Filtered
	}
	if limit > 0 && r.unfilteredDeliveries(evs) > limit {
		return routes{}, errOverLimit
	}
	if filtered {
		if err := r.applyFilters(ctx, q, pl, evs); err != nil {
			return routes{}, err
		}
	}
	return r, nil
}

// errOverLimit is loadRoutes's answer for events that could make more
// deliveries than its limit.
var errOverLimit = errors.New("more deliveries than the limit, before filtering")

// unfilteredDeliveries is how many deliveries evs would make were every
// filter to let them through.
func (r routes) unfilteredDeliveries(evs []dbq.Event) int {
	n := 0
	for _, ev := range evs {
		for _, subs := range r.reachable(ev) {
			seen := map[uuid.UUID]bool{}
			for _, sub := range subs {
				if !seen[sub.EndpointID] && matchesType(sub, ev.Type) {
					seen[sub.EndpointID] = true
					n++
				}
			}
		}
	}
	return n
}

// applyFilters asks Postgres which filters pass, of the subscriptions with
// one that each event may reach by its type, and keeps the answer. The
// filters of a sealed payload (secretbox.Payloads), which Postgres cannot
// read, are matched here in Go (matchSealed).
func (r routes) applyFilters(ctx context.Context, q *dbq.Queries, pl *secretbox.Payloads, evs []dbq.Event) error {
	var (
		p      dbq.MatchFiltersParams
		sealed map[int][]uuid.UUID // event index: the subscriptions to match it with
	)
	subIndex := map[uuid.UUID]int32{}
	for i, ev := range evs {
		isSealed := secretbox.IsSealedJSON(ev.Payload)
		for _, subs := range r.reachable(ev) {
			for _, sub := range subs {
				if !sub.Filtered || !matchesType(sub, ev.Type) {
					continue
				}
				if ev.Payload == nil { // large, left out of EventsByID: is it sealed?
					payload, err := q.EventPayload(ctx, ev.ID)
					if err != nil {
						return fmt.Errorf("read payload of event %s: %w", ev.ID, err)
					}
					ev.Payload, isSealed = payload, secretbox.IsSealedJSON(payload)
					if isSealed { // matched in Go; a clear one in Postgres
						evs[i].Payload = payload
					}
				}
				if isSealed {
					if sealed == nil {
						sealed = map[int][]uuid.UUID{}
					}
					sealed[i] = append(sealed[i], sub.ID)
					continue
				}
				j, ok := subIndex[sub.ID]
				if !ok {
					p.SubscriptionIds = append(p.SubscriptionIds, sub.ID)
					j = int32(len(p.SubscriptionIds))
					subIndex[sub.ID] = j
				}
				p.PairEvents = append(p.PairEvents, int32(i+1))
				p.PairSubscriptions = append(p.PairSubscriptions, j)
			}
		}
	}
	if sealed != nil {
		if err := r.matchSealed(ctx, q, pl, evs, sealed); err != nil {
			return err
		}
	}
	if len(p.PairEvents) == 0 {
		return nil
	}
	p.EventIds = make([]uuid.UUID, len(evs))
	for i, ev := range evs {
		p.EventIds[i] = ev.ID
	}
	rows, err := q.MatchFilters(ctx, p)
	if err != nil {
		return fmt.Errorf("match filters: %w", err)
	}
	for _, row := range rows {
		r.passed[eventSubscription{evs[row.EventIdx-1].ID, p.SubscriptionIds[row.SubscriptionIdx-1]}] = true
	}
	return nil
}

// matchSealed matches sealed payloads with the filters of the
// subscriptions pairs gives each (by event index), in Go: each payload
// opened and decoded once, each filter read and parsed once.
func (r routes) matchSealed(ctx context.Context, q *dbq.Queries, pl *secretbox.Payloads, evs []dbq.Event, pairs map[int][]uuid.UUID) error {
	var ids []uuid.UUID
	seen := map[uuid.UUID]bool{}
	for _, subs := range pairs {
		for _, id := range subs {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	rows, err := q.SubscriptionFilters(ctx, ids)
	if err != nil {
		return fmt.Errorf("read filters: %w", err)
	}
	filters := make(map[uuid.UUID]*filter.Filter, len(rows))
	for _, row := range rows {
		f, err := filter.Parse(row.Filter)
		if err != nil {
			return fmt.Errorf("parse filter of subscription %s: %w", row.ID, err)
		}
		filters[row.ID] = f
	}
	for i, subs := range pairs {
		ev := evs[i]
		clear, err := pl.OpenJSON(ctx, ev.TenantID, ev.Payload)
		if err != nil {
			return fmt.Errorf("open payload of event %s: %w", ev.ID, err)
		}
		doc, err := filter.DecodePayload(clear)
		if err != nil {
			return fmt.Errorf("payload of event %s: %w", ev.ID, err)
		}
		for _, id := range subs {
			if f := filters[id]; f != nil && f.MatchDoc(doc) {
				r.passed[eventSubscription{ev.ID, id}] = true
			}
		}
	}
	return nil
}

// reachable lists the groups of subscriptions ev may reach by the routing
// rule, whatever their types and filters.
func (r routes) reachable(ev dbq.Event) [][]dbq.SubscriptionsForEventsRow {
	switch {
	case ev.Broadcast:
		out := make([][]dbq.SubscriptionsForEventsRow, 0, len(r.byConsumer))
		for _, subs := range r.byConsumer {
			out = append(out, subs)
		}
		return out
	case ev.Consumer != nil:
		if *ev.Consumer == "" {
			return nil // never the tenant's own endpoints
		}
		out := [][]dbq.SubscriptionsForEventsRow{r.byConsumer[*ev.Consumer]}
		if sluice.IsReservedType(ev.Type) {
			out = append(out, r.byConsumer[""])
		}
		return out
	default:
		return [][]dbq.SubscriptionsForEventsRow{r.byConsumer[""]}
	}
}

// endpoints returns the endpoints ev goes to: those it may reach whose
// subscriptions match its type, and its payload when they have a filter,
// each once.
func (r routes) endpoints(ev dbq.Event) []uuid.UUID {
	var out []uuid.UUID
	for _, subs := range r.reachable(ev) {
		out = append(out, r.matchingEndpoints(subs, ev)...)
	}
	return out
}

// matchingEndpoints are the endpoints, each once, of the subscriptions in
// subs that ev matches. An endpoint belongs to one consumer, so the groups
// of reachable never share one.
func (r routes) matchingEndpoints(subs []dbq.SubscriptionsForEventsRow, ev dbq.Event) []uuid.UUID {
	var out []uuid.UUID
	seen := map[uuid.UUID]bool{}
	for _, sub := range subs {
		if seen[sub.EndpointID] || !matchesType(sub, ev.Type) {
			continue
		}
		if sub.Filtered && !r.passed[eventSubscription{ev.ID, sub.ID}] {
			continue
		}
		seen[sub.EndpointID] = true
		out = append(out, sub.EndpointID)
	}
	return out
}

func matchesType(sub dbq.SubscriptionsForEventsRow, eventType string) bool {
	for _, pattern := range sub.EventTypes {
		if sluice.MatchEventType(pattern, eventType) {
			return true
		}
	}
	return false
}

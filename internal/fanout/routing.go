package fanout

import (
	"context"
	"fmt"

	"github.com/google/uuid"

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
type routes struct {
	byConsumer map[string][]dbq.SubscriptionsForEventsRow
}

// loadRoutes loads, with one query, the subscriptions evs can reach.
func loadRoutes(ctx context.Context, q *dbq.Queries, tenantID uuid.UUID, evs []dbq.Event) (routes, error) {
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
	r := routes{byConsumer: map[string][]dbq.SubscriptionsForEventsRow{}}
	for _, row := range rows {
		key := ""
		if row.Consumer != nil {
			key = *row.Consumer
		}
		r.byConsumer[key] = append(r.byConsumer[key], row)
	}
	return r, nil
}

// endpoints returns the endpoints ev goes to: those it may reach whose
// subscriptions match its type, each once.
func (r routes) endpoints(ev dbq.Event) []uuid.UUID {
	switch {
	case ev.Broadcast:
		var out []uuid.UUID
		for _, subs := range r.byConsumer {
			out = append(out, matchingEndpoints(subs, ev.Type)...)
		}
		return out
	case ev.Consumer != nil:
		if *ev.Consumer == "" {
			return nil // never the tenant's own endpoints
		}
		out := matchingEndpoints(r.byConsumer[*ev.Consumer], ev.Type)
		if sluice.IsReservedType(ev.Type) {
			out = append(out, matchingEndpoints(r.byConsumer[""], ev.Type)...)
		}
		return out
	default:
		return matchingEndpoints(r.byConsumer[""], ev.Type)
	}
}

func matchingEndpoints(subs []dbq.SubscriptionsForEventsRow, eventType string) []uuid.UUID {
	var out []uuid.UUID
	seen := map[uuid.UUID]bool{}
	for _, sub := range subs {
		if seen[sub.EndpointID] {
			continue
		}
		for _, pattern := range sub.EventTypes {
			if sluice.MatchEventType(pattern, eventType) {
				seen[sub.EndpointID] = true
				out = append(out, sub.EndpointID)
				break
			}
		}
	}
	return out
}

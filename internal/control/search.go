package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/secretbox"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Search: the lists of deliveries and events, newest first, with their
// filters. Each filter is read and checked here, whichever door it came
// through, and a refused one is a sluice.ValidationError naming the query
// parameter; the lists are one statement each (ListDeliveries, ListEvents
// in queries/), whose time range and cursor bound an index scan of each
// week's partition (00041_search.sql).

// Deliveries is a page of the caller's deliveries matching f; an endpoint
// filter outside the scope is sluice.ErrNotFound. A portal caller's are
// those to its consumer's endpoints, whatever f.Consumer says.
func (c *Control) Deliveries(ctx context.Context, who Caller, f sluice.DeliveryFilter, p sluice.PageParams) (sluice.Page[sluice.Delivery], error) {
	v := &sluice.ValidationError{}
	if err := validStatus(f.Status); err != nil {
		return sluice.Page[sluice.Delivery]{}, err
	}
	arg := dbq.ListDeliveriesParams{
		TenantID: who.Tenant, EndpointID: f.EndpointID, EventID: f.EventID, Status: f.Status,
		Since: f.Since, Until: f.Until, Consumer: f.Consumer, After: p.After, MaxRows: int32(p.Limit) + 1,
	}
	arg.EventType, arg.TypePrefix = typeMatch("event_type", f.EventType, v)
	arg.StatusMin, arg.StatusMax = statusCodes(f.StatusCode, v)
	timeRange(f.Since, f.Until, v)
	if err := v.Err(); err != nil {
		return sluice.Page[sluice.Delivery]{}, err
	}
	if who.portal() {
		if f.EndpointID != nil {
			if _, err := c.Endpoint(ctx, who, *f.EndpointID); err != nil {
				return sluice.Page[sluice.Delivery]{}, err
			}
		}
		arg.Consumer = who.Consumer
	}
	rows, err := c.deliveryRows(ctx, arg)
	if err != nil {
		return sluice.Page[sluice.Delivery]{}, fmt.Errorf("list deliveries: %w", err)
	}
	return store.Page(rows, p, func(r dbq.Delivery) uuid.UUID { return r.ID },
		func(r dbq.Delivery) (sluice.Delivery, error) { return store.DeliveryFromRow(r), nil })
}

// deliveryRows reads a page of deliveries: the dead letters of one
// endpoint or of a consumer's endpoints (a portal's) endpoint by endpoint
// (ListEndpointsDead), any other list off the tenant's time index.
func (c *Control) deliveryRows(ctx context.Context, arg dbq.ListDeliveriesParams) ([]dbq.Delivery, error) {
	if arg.Status == nil || *arg.Status != sluice.DeliveryDead || (arg.EndpointID == nil && arg.Consumer == nil) {
		return store.Read(ctx, c.store, (*dbq.Queries).ListDeliveries, arg)
	}
	return store.Read(ctx, c.store, (*dbq.Queries).ListEndpointsDead, dbq.ListEndpointsDeadParams{
		TenantID: arg.TenantID, Since: arg.Since, Until: arg.Until, After: arg.After, EventID: arg.EventID,
		EventType: arg.EventType, TypePrefix: arg.TypePrefix, StatusMin: arg.StatusMin, StatusMax: arg.StatusMax,
		MaxRows: arg.MaxRows, EndpointID: arg.EndpointID, Consumer: arg.Consumer,
	})
}

// Events is a page of the caller's events matching f: a portal caller's
// are those addressed to its consumer and the broadcasts.
func (c *Control) Events(ctx context.Context, who Caller, f sluice.EventFilter, p sluice.PageParams) (sluice.Page[sluice.Event], error) {
	v := &sluice.ValidationError{}
	arg := dbq.ListEventsParams{
		TenantID: who.Tenant, Since: f.Since, Until: f.Until, Consumer: who.Consumer,
		After: p.After, MaxRows: int32(p.Limit) + 1, MaxBytes: sluice.MaxPageBytes,
	}
	arg.Type, arg.TypePrefix = typeMatch("type", f.Type, v)
	timeRange(f.Since, f.Until, v)
	var match *filter.Filter
	if f.Filter != nil {
		if compiled := compileFilter(json.RawMessage(*f.Filter), v); compiled != nil {
			arg.FilterPath = &compiled.JSONPath
			match, _ = filter.Parse(compiled.JSON) // parsed once already: no error
		}
	}
	if err := v.Err(); err != nil {
		return sluice.Page[sluice.Event]{}, err
	}
	rows, next, err := c.eventRows(ctx, who, arg, match, p.Limit)
	if err != nil {
		return sluice.Page[sluice.Event]{}, fmt.Errorf("list events: %w", err)
	}
	page, err := store.Page(rows, p, func(r dbq.ListEventsRow) uuid.UUID { return r.ID },
		func(r dbq.ListEventsRow) (sluice.Event, error) { return store.EventFromRow(dbq.Event(r)), nil })
	if page.Next == nil {
		page.Next = next
	}
	return page, err
}

// maxSealedReads bounds the statements one page of events filtered by
// payload reads when its tenant's payloads are sealed.
const maxSealedReads = 10

// eventRows reads the rows of a page of events (limit+1 when there are
// more), their payloads opened. Postgres matches match (the filter, if
// any) against clear payloads and lets sealed ones through
// (ListEvents): those are matched here, in Go, reading on past the rows
// they leave out, at most maxSealedReads times; a page cut short there
// comes with next, the cursor after the last row read. A page also ends,
// with next after its last row, before the first row whose payload would
// take the page's past sluice.MaxPageBytes: as stored (ListEvents leaves
// that row's payload out), or as read; it holds one row at least.
func (c *Control) eventRows(ctx context.Context, who Caller, arg dbq.ListEventsParams, match *filter.Filter, limit int) ([]dbq.ListEventsRow, *uuid.UUID, error) {
	pl := c.store.Payloads()
	var kept []dbq.ListEventsRow
	bytes := 0
	for reads := 1; ; reads++ {
		rows, err := store.Read(ctx, c.store, (*dbq.Queries).ListEvents, arg)
		if err != nil {
			return nil, nil, err
		}
		more := len(rows) == int(arg.MaxRows)
		for i, r := range rows {
			if r.Payload == nil || (len(kept) > 0 && bytes+len(r.Payload) > sluice.MaxPageBytes) {
				if len(kept) > 0 {
					return kept, &kept[len(kept)-1].ID, nil
				}
				if i == 0 {
					return nil, nil, errors.New("a page of events read without its first payload")
				}
				// Only rows the filter left out before it: read on from
				// there (the first row of a read is never left out).
				rows, more = rows[:i], true
				break
			}
			if !secretbox.IsSealedJSON(r.Payload) {
				bytes += len(r.Payload)
				kept = append(kept, r)
				continue
			}
			if r.Payload, err = pl.OpenJSON(ctx, who.Tenant, r.Payload); err != nil {
				return nil, nil, fmt.Errorf("open payload of event %s: %w", r.ID, err)
			}
			if match != nil {
				doc, err := filter.DecodePayload(r.Payload)
				if err != nil {
					return nil, nil, fmt.Errorf("payload of event %s: %w", r.ID, err)
				}
				if !match.MatchDoc(doc) {
					continue
				}
			}
			bytes += len(r.Payload)
			kept = append(kept, r)
		}
		if len(kept) > limit || !more {
			return kept, nil, nil
		}
		last := rows[len(rows)-1].ID
		if reads == maxSealedReads {
			return kept, &last, nil
		}
		arg.After = &last
	}
}

// typeMatch reads an event-type filter: one type (exact), or "prefix.*",
// every type that starts with "prefix." (as a subscription's pattern).
func typeMatch(field string, raw *string, v *sluice.ValidationError) (exact, prefix *string) {
	if raw == nil {
		return nil, nil
	}
	t := *raw
	if p, ok := strings.CutSuffix(t, "*"); ok && strings.HasSuffix(p, ".") && len(p) > 1 && !strings.Contains(p, "*") {
		return nil, &p
	}
	if t == "" || strings.Contains(t, "*") {
		v.Add(field, `must be an event type, or a prefix such as "invoice.*"`)
		return nil, nil
	}
	return &t, nil
}

// Status codes a status_code filter may name.
const minStatusCode, maxStatusCode = 100, 599

// statusCodes reads a status-code filter: one code ("404") or a range
// ("500-599"), both ends included.
func statusCodes(raw *string, v *sluice.ValidationError) (lo, hi *int32) {
	if raw == nil {
		return nil, nil
	}
	code := func(s string) (int32, bool) {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		return int32(n), err == nil && n >= minStatusCode && n <= maxStatusCode
	}
	first, last, isRange := strings.Cut(*raw, "-")
	if !isRange {
		last = first
	}
	l, okL := code(first)
	h, okH := code(last)
	if !okL || !okH || l > h {
		v.Add("status_code", `must be a status code from %d to %d, or a range of them such as "500-599"`, minStatusCode, maxStatusCode)
		return nil, nil
	}
	return &l, &h
}

// timeRange checks that a [since, until) range is not empty.
func timeRange(since, until *time.Time, v *sluice.ValidationError) {
	if since != nil && until != nil && !since.Before(*until) {
		v.Add("until", "must be after since")
	}
}

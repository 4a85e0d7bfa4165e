package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/fanout"
)

// subscribe subscribes endpoint to patterns with filter (none when nil)
// and returns the subscription's JSON.
func (b *testBundle) subscribe(key, endpoint string, filter any, patterns ...string) map[string]any {
	b.t.Helper()
	body := map[string]any{"endpoint_id": endpoint, "event_types": patterns}
	if filter != nil {
		body["filter"] = filter
	}
	r := b.do(key, http.MethodPost, "/v1/subscriptions", body)
	require.Equal(b.t, http.StatusCreated, r.Status, string(r.Body))
	return r.JSON(b.t)
}

func TestSubscriptionFilterIsKeptAndShown(t *testing.T) {
	b := setup(t)
	ep := b.createEndpoint(b.keyA, nil)["id"].(string)

	plain := b.subscribe(b.keyA, ep, nil, "*")
	require.Contains(t, plain, "filter")
	require.Nil(t, plain["filter"], "a subscription without a filter shows null")

	filter := map[string]any{"customer.tier": "gold", "total": map[string]any{"$gte": 100.0}}
	sub := b.subscribe(b.keyA, ep, filter, "order.*")
	require.Equal(t, filter, sub["filter"])
	got := b.do(b.keyA, http.MethodGet, "/v1/subscriptions/"+sub["id"].(string), nil).JSON(t)
	require.Equal(t, filter, got["filter"])

	// Explicit null is no filter.
	r := b.do(b.keyA, http.MethodPost, "/v1/subscriptions", `{"endpoint_id": "`+ep+`", "event_types": ["x"], "filter": null}`)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	require.Nil(t, r.JSON(t)["filter"])

	list := b.do(b.keyA, http.MethodGet, "/v1/subscriptions?endpoint_id="+ep, nil).JSON(t)["data"].([]any)
	require.Len(t, list, 3)
	filters := map[string]any{}
	for _, s := range list {
		m := s.(map[string]any)
		filters[m["id"].(string)] = m["filter"]
	}
	require.Equal(t, filter, filters[sub["id"].(string)])
	require.Nil(t, filters[plain["id"].(string)])
}

func TestSubscriptionFilterRefusals(t *testing.T) {
	b := setup(t)
	ep := b.createEndpoint(b.keyA, nil)["id"].(string)
	deep := strings.Repeat(`{"a":`, 33) + "1" + strings.Repeat("}", 33)
	for _, tc := range []struct {
		name, filter, field, message string
	}{
		{"not an object", `"gold"`, "filter", "must be a JSON object"},
		{"unknown operator", `{"customer.tier": {"$regex": "^g"}}`, "filter.customer.tier.$regex", "is not an operator"},
		{"unknown combinator", `{"$nor": []}`, "filter.$nor", "is not a combinator"},
		{"bad operand", `{"$or": [{"a": 1}, {"total": {"$gt": true}}]}`, "filter.$or[1].total.$gt", "takes a number or a string"},
		{"$in needs an array", `{"a": {"$in": "x"}}`, "filter.a.$in", "takes an array"},
		{"$exists needs a boolean", `{"a": {"$exists": 1}}`, "filter.a.$exists", "takes true or false"},
		{"empty $and", `{"$and": []}`, "filter.$and", "non-empty array"},
		{"empty segment", `{"a..b": 1}`, "filter.a..b", "empty segment"},
		{"too deep", deep, "filter." + strings.TrimSuffix(strings.Repeat("a.", 32), "."), "nests deeper than 32"},
		{"too large", `{"a": {"$in": [` + strings.Repeat(`"xxxxxxxxxx",`, 400) + `"x"]}}`, "filter", "a filter may be at most 4096"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do(b.keyA, http.MethodPost, "/v1/subscriptions",
				`{"endpoint_id": "`+ep+`", "event_types": ["*"], "filter": `+tc.filter+`}`)
			p := requireProblem(t, r, http.StatusUnprocessableEntity)
			errs := p["errors"].([]any)
			require.Len(t, errs, 1)
			require.Equal(t, tc.field, errs[0].(map[string]any)["field"])
			require.Contains(t, errs[0].(map[string]any)["message"], tc.message)
		})
	}
	list := b.do(b.keyA, http.MethodGet, "/v1/subscriptions?endpoint_id="+ep, nil).JSON(t)["data"].([]any)
	require.Empty(t, list, "no refused filter made a subscription")
}

// TestPayloadFiltersRoute posts events, singly and in batches, to
// endpoints whose subscriptions have filters: each reaches only the
// endpoints one of whose subscriptions it matches, under the consumer
// routing rules as they were.
func TestPayloadFiltersRoute(t *testing.T) {
	b := setup(t)
	b.putConsumer(b.keyA, "cus_1", nil)
	endpoint := func(consumer string) string {
		body := map[string]any{"url": "https://example.com/hook"}
		if consumer != "" {
			body["consumer"] = consumer
		}
		return b.createEndpoint(b.keyA, body)["id"].(string)
	}
	gold, all, big, either := endpoint(""), endpoint(""), endpoint(""), endpoint("")
	cusGold, cusOther := endpoint("cus_1"), endpoint("cus_1")
	b.subscribe(b.keyA, gold, map[string]any{"tier": "gold"}, "*")
	b.subscribe(b.keyA, all, nil, "*")
	b.subscribe(b.keyA, big, map[string]any{"total": map[string]any{"$gte": 100}}, "order.*")
	b.subscribe(b.keyA, either, map[string]any{"tier": "silver"}, "*") // two subscriptions: either lets an event through
	b.subscribe(b.keyA, either, map[string]any{"total": map[string]any{"$lt": 10}}, "*")
	b.subscribe(b.keyA, cusGold, map[string]any{"tier": "gold"}, "*")
	b.subscribe(b.keyA, cusOther, map[string]any{"$not": map[string]any{"tier": "gold"}}, "*")

	events := []map[string]any{
		{"type": "order.paid", "payload": map[string]any{"tier": "gold", "total": 50}},
		{"type": "order.paid", "payload": map[string]any{"tier": "silver", "total": 150.0}},
		{"type": "user.created", "payload": map[string]any{"tier": "silver", "total": 150}},
		{"type": "order.paid", "payload": map[string]any{"total": "100"}},
		{"type": "order.paid", "payload": map[string]any{"tier": "gold"}, "consumer": "cus_1"},
		{"type": "order.paid", "payload": map[string]any{"tier": "bronze"}, "consumer": "cus_1"},
		{"type": "order.paid", "payload": map[string]any{"tier": "gold", "total": 5}, "broadcast": true},
	}
	want := [][]string{
		{gold, all},
		{all, big, either},
		{all, either}, // big's subscription is to order.* only
		{all},         // "100" is a string: $gte 100 and $lt 10 do not compare with it
		{cusGold},
		{cusOther},
		{gold, all, either, cusGold},
	}

	// One batch with consumers (routed by planFanOut and MatchFilters), one
	// without (InsertRoutedEvents), and single posts (both).
	got := b.fanOut(b.keyA, events...)
	for i := range events {
		require.ElementsMatch(t, want[i], got[i], "batch, event %d", i)
	}
	var own []map[string]any
	var ownWant [][]string
	for i, ev := range events {
		if ev["consumer"] == nil {
			own, ownWant = append(own, ev), append(ownWant, want[i])
		}
	}
	got = b.fanOut(b.keyA, own...)
	for i := range own {
		require.ElementsMatch(t, ownWant[i], got[i], "batch without consumers, event %d", i)
	}
	for i, ev := range events {
		r := b.do(b.keyA, http.MethodPost, "/v1/events", ev)
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		id := r.JSON(t)["id"].(string)
		_, _, err := fanout.Events(t.Context(), b.store, []uuid.UUID{uuid.MustParse(id)}, nil)
		require.NoError(t, err)
		var reached []string
		for _, d := range b.do(b.keyA, http.MethodGet, "/v1/events/"+id, nil).JSON(t)["deliveries"].([]any) {
			reached = append(reached, d.(map[string]any)["endpoint_id"].(string))
		}
		require.ElementsMatch(t, want[i], reached, "single post, event %d", i)
	}
}

func TestPayloadNumbersBeyondJSONB(t *testing.T) {
	b := setup(t)
	for _, payload := range []string{`{"n": 1e200000}`, `{"n": 1e-20000}`, `{"n": 0.` + strings.Repeat("0", 16384) + `1}`} {
		p := requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/events", `{"type": "x", "payload": `+payload+`}`), http.StatusUnprocessableEntity)
		require.Equal(t, "payload", p["errors"].([]any)[0].(map[string]any)["field"])
	}
	r := b.do(b.keyA, http.MethodPost, "/v1/events", `{"type": "x", "payload": {"n": 1e1000, "m": 123456789012345678901234567890}}`)
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
}

package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// chainSchema is the probe's schema: levels $defs, each an applicator of
// refs $refs to the level below, so the leaf is reached by refs^levels
// paths; pad plain subschemas at the top spend the rest of the budget.
func chainSchema(levels, refs int, applicator, leaf string, pad int) string {
	var b strings.Builder
	b.WriteString(`{"allOf":[` + strings.Repeat(`{"type":"object"},`, pad) + `{"$ref":"#/$defs/d0"}],"$defs":{`)
	for i := range levels {
		var list []string
		for range refs {
			list = append(list, fmt.Sprintf(`{"$ref":"#/$defs/d%d"}`, i+1))
		}
		fmt.Fprintf(&b, `"d%d":{"%s":[%s]},`, i, applicator, strings.Join(list, ","))
	}
	fmt.Fprintf(&b, `"d%d":%s}}`, levels, leaf)
	return b.String()
}

func putSchema(b *testBundle, name, schema string) response {
	return b.do(b.keyA, http.MethodPut, "/v1/event-types/"+name, `{"schema":`+schema+`}`)
}

// TestSchemaBudget: the probe's exponential schema and its anyOf and oneOf
// variants are refused when saved, naming why; a schema at the budget is
// saved, validates events, and describes a failing one in a small answer.
func TestSchemaBudget(t *testing.T) {
	b := setup(t)
	for _, applicator := range []string{"allOf", "anyOf", "oneOf"} {
		r := putSchema(b, "exp."+applicator, chainSchema(22, 2, applicator, `{"type":"object"}`, 0))
		p := requireProblem(t, r, http.StatusUnprocessableEntity)
		field := p["errors"].([]any)[0].(map[string]any)
		require.Equal(t, "schema", field["field"])
		require.Contains(t, field["message"], "more than the budget of 1000", applicator)
		requireProblem(t, b.do(b.keyA, http.MethodGet, "/v1/event-types/exp."+applicator, nil), http.StatusNotFound)
	}

	// Five levels of three $refs reach the leaf by 243 paths: 728
	// evaluations, and 272 more at the top make 1000, the budget.
	leaf := `{"type":"object","properties":{"s":{"not":{"const":"bad"}}}}`
	requireProblem(t, putSchema(b, "at.budget", chainSchema(5, 3, "allOf", leaf, 272)), http.StatusUnprocessableEntity)
	r := putSchema(b, "at.budget", chainSchema(5, 3, "allOf", leaf, 271))
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))

	r = b.do(b.keyA, http.MethodPost, "/v1/events", `{"type":"at.budget","payload":{"s":"good"}}`)
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	r = b.do(b.keyA, http.MethodPost, "/v1/events", `{"type":"at.budget","payload":{"s":"bad","pad":"`+strings.Repeat("x", 100_000)+`"}}`)
	p := requireProblem(t, r, http.StatusUnprocessableEntity)
	require.Less(t, len(r.Body), 16<<10, "the failing answer is small, whatever failed by how many paths")
	require.Equal(t, "payload/s", p["errors"].([]any)[0].(map[string]any)["field"])
}

// TestValidationBoundedPerRequest: a request's payloads may cost at most
// eventschema.MaxRequestCost to validate; past it the request is refused
// before its payloads are validated, and a batch stops validating at its
// first failing event.
func TestValidationBoundedPerRequest(t *testing.T) {
	b := setup(t)
	r := putSchema(b, "list.posted", `{"type":"object","properties":{"xs":{"type":"array","items":{"type":"integer","minimum":0}}}}`)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))

	// 60,000 elements: one payload within the budget, a batch of ten not.
	payload := `{"xs":[` + strings.Repeat("1,", 59_999) + `1]}`
	event := `{"type":"list.posted","payload":` + payload + `}`
	r = b.do(b.keyA, http.MethodPost, "/v1/events", event)
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	r = b.do(b.keyA, http.MethodPost, "/v1/events/batch", `{"events":[`+strings.Repeat(event+",", 9)+event+`]}`)
	p := requireProblem(t, r, http.StatusUnprocessableEntity)
	field := p["errors"].([]any)[0].(map[string]any)
	require.Regexp(t, `^events\[\d\]\.payload$`, field["field"])
	require.Contains(t, field["message"], "post fewer or smaller events at once")

	// The first failing event ends the checks: one schema error, not ten.
	bad := `{"type":"list.posted","payload":{"xs":[-1]}}`
	r = b.do(b.keyA, http.MethodPost, "/v1/events/batch", `{"events":[`+strings.Repeat(bad+",", 9)+bad+`]}`)
	p = requireProblem(t, r, http.StatusUnprocessableEntity)
	require.Len(t, p["errors"], 1)
	require.Equal(t, "events[0].payload/xs/0", p["errors"].([]any)[0].(map[string]any)["field"])

	var list struct{ Data []json.RawMessage }
	require.NoError(t, json.Unmarshal(b.do(b.keyA, http.MethodGet, "/v1/events", nil).Body, &list))
	require.Len(t, list.Data, 1, "only the single event was stored")
}

// TestUndeliverableURLsRefused: every address the dialler would refuse,
// and every impossible port, is refused when an endpoint is created or
// changed, even with private targets allowed (as in these tests).
func TestUndeliverableURLsRefused(t *testing.T) {
	b := setup(t)
	ep := b.createEndpoint(b.keyA, nil)["id"].(string)
	for _, url := range []string{
		"https://198.18.0.1/x", "https://240.0.0.1/x", "https://[2001:db8::1]/x", "https://[2002:7f00:1::]/x",
		"https://[::127.0.0.1]/x", "https://[64:ff9b::7f00:1]/x", "http://127.0.0.1:99999/x", "http://127.0.0.1:0/x",
		"https://169.254.169.254/x", "https://0.0.0.0/x", "https://100.64.0.1/x",
	} {
		body := map[string]any{"url": url}
		p := requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/endpoints", body), http.StatusUnprocessableEntity)
		require.Equal(t, "url", p["errors"].([]any)[0].(map[string]any)["field"], url)
		requireProblem(t, b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+ep, body), http.StatusUnprocessableEntity)
	}
	r := b.do(b.keyA, http.MethodPost, "/v1/endpoints", map[string]any{"url": "http://127.0.0.1:65535/x"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
}

// TestValidationChargesRate: what a request's validation cost is charged to
// the tenant's bucket, a request per 2,000 units, so expensive events
// wait like many requests would.
func TestValidationChargesRate(t *testing.T) {
	b := setup(t)
	b.setRate("A", "120/m") // two a second, bursts of 4: the schema's PUT, the post, and its validation's first token
	r := putSchema(b, "list.posted", `{"type":"object","properties":{"xs":{"type":"array","items":{"type":"integer"}}}}`)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	payload := `{"xs":[` + strings.Repeat("1,", 59_999) + `1]}` // about 60,000 units: 30 requests more
	r = b.do(b.keyA, http.MethodPost, "/v1/events", `{"type":"list.posted","payload":`+payload+`}`)
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	r = b.do(b.keyA, http.MethodGet, "/v1/events", nil)
	requireProblem(t, r, http.StatusTooManyRequests)
	after, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, after, 10, "the debt of the validation is paid off first, two tokens a second")
}

// TestValidationPaidFirst: an event whose price is a request or more is
// validated only if the tenant's bucket holds a token beyond its
// request's; otherwise it is refused (429) unvalidated, so concurrent
// requests cannot all start costly validations on the same tokens.
func TestValidationPaidFirst(t *testing.T) {
	b := setup(t)
	b.setRate("A", "60/m") // one a second, bursts of 2
	r := putSchema(b, "list.posted", `{"type":"object","properties":{"xs":{"type":"array","items":{"type":"integer"}}}}`)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	r = b.do(b.keyA, http.MethodGet, "/v1/event-types/list.posted", nil) // one token left
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))

	payload := `{"xs":[` + strings.Repeat("1,", 59_999) + `1]}`
	r = b.do(b.keyA, http.MethodPost, "/v1/events", `{"type":"list.posted","payload":`+payload+`}`)
	p := requireProblem(t, r, http.StatusTooManyRequests)
	require.Contains(t, p["detail"], "rate limit")
	require.NotEmpty(t, r.Header.Get("Retry-After"))

	var list struct{ Data []json.RawMessage }
	b.setRate("A", "1000/s")
	require.NoError(t, json.Unmarshal(b.do(b.keyA, http.MethodGet, "/v1/events", nil).Body, &list))
	require.Empty(t, list.Data)
}

// probeSchema is the pattern probe's schema: 30 anyOf of 30 alternatives,
// each checking "s" against "^(a+)+$" (900 patterns, under the evaluation
// budget), and a last alternative "b$" that a final "b" passes.
func probeSchema() string {
	leaf := `{"properties":{"s":{"pattern":"^(a+)+$"}}}`
	inner := `{"anyOf":[` + strings.TrimSuffix(strings.Repeat(leaf+",", 30), ",") + `]}`
	return `{"anyOf":[` + strings.Repeat(inner+",", 30) + `{"properties":{"s":{"pattern":"b$"}}}]}`
}

func probeEvent(n int) string {
	return `{"type":"probe","payload":{"s":"` + strings.Repeat("a", n) + `b"}}`
}

// TestPatternProbe: the probe's schema is saved, being within the
// evaluation budget; its 250,000-character event, which passes, is
// refused on price before it is validated, alone and in a batch; and an
// event it admits is charged to the tenant's bucket for what its
// validation cost (about 250,000 units: 125 requests).
func TestPatternProbe(t *testing.T) {
	b := setup(t)
	b.setRate("A", "1000/s")
	r := putSchema(b, "probe", probeSchema())
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))

	for path, body := range map[string]string{
		"/v1/events":       probeEvent(250_000),
		"/v1/events/batch": `{"events":[` + strings.Repeat(probeEvent(250_000)+",", 4) + probeEvent(250_000) + `]}`,
	} {
		p := requireProblem(t, b.do(b.keyA, http.MethodPost, path, body), http.StatusUnprocessableEntity)
		field := p["errors"].([]any)[0].(map[string]any)
		require.Regexp(t, `^(events\[0\]\.)?payload$`, field["field"], path)
		require.Contains(t, field["message"], "would cost", path)
		require.Contains(t, field["message"], "post fewer or smaller events at once", path)
	}

	remaining := func(r response) int {
		n, err := strconv.Atoi(r.Header.Get("RateLimit-Remaining"))
		require.NoError(t, err)
		return n
	}
	before := remaining(b.do(b.keyA, http.MethodGet, "/v1/event-types/probe", nil))
	r = b.do(b.keyA, http.MethodPost, "/v1/events", probeEvent(4000))
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	require.GreaterOrEqual(t, before-remaining(r), 1+100, "charged for its validation, not only the request")
}

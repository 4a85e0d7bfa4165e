package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBadInput sends every kind of bad input the API must refuse, and checks
// each answer is the documented 4xx problem, never a 500.
func TestBadInput(t *testing.T) {
	b := setup(t)
	ep := b.createEndpoint(b.keyA, nil)["id"].(string)
	epPath := "/v1/endpoints/" + ep

	cases := []struct {
		name, method, path string
		body               any
		status             int
		field              string // for 422: a field the problem must name
	}{
		{"empty body", http.MethodPost, "/v1/endpoints", "", 400, ""},
		{"malformed JSON", http.MethodPost, "/v1/endpoints", `{"url":`, 400, ""},
		{"not JSON", http.MethodPost, "/v1/endpoints", `url=https://x`, 400, ""},
		{"two values", http.MethodPost, "/v1/endpoints", `{"url":"https://a.example"} {}`, 400, ""},
		{"array body", http.MethodPost, "/v1/endpoints", `[]`, 422, "(body)"},
		{"unknown field", http.MethodPost, "/v1/endpoints", `{"url":"https://a.example","colour":"red"}`, 422, "colour"},
		{"wrong type url", http.MethodPost, "/v1/endpoints", `{"url":42}`, 422, "url"},
		{"wrong type max_in_flight", http.MethodPost, "/v1/endpoints", `{"url":"https://a.example","max_in_flight":"ten"}`, 422, "max_in_flight"},
		{"wrong type headers", http.MethodPost, "/v1/endpoints", `{"url":"https://a.example","headers":["a"]}`, 422, "headers"},
		{"missing url", http.MethodPost, "/v1/endpoints", `{}`, 422, "url"},
		{"null body", http.MethodPost, "/v1/endpoints", `null`, 422, "url"},
		{"relative url", http.MethodPost, "/v1/endpoints", `{"url":"/hooks"}`, 422, "url"},
		{"ftp url", http.MethodPost, "/v1/endpoints", `{"url":"ftp://a.example/x"}`, 422, "url"},
		{"userinfo", http.MethodPost, "/v1/endpoints", `{"url":"https://bob:pw@a.example/x"}`, 422, "url"},
		{"too long url", http.MethodPost, "/v1/endpoints", `{"url":"https://a.example/` + strings.Repeat("a", 2100) + `"}`, 422, "url"},
		{"max_in_flight zero", http.MethodPost, "/v1/endpoints", `{"url":"https://a.example","max_in_flight":0}`, 422, "max_in_flight"},
		{"max_in_flight huge", http.MethodPost, "/v1/endpoints", `{"url":"https://a.example","max_in_flight":1000}`, 422, "max_in_flight"},
		{"both rates", http.MethodPost, "/v1/endpoints", `{"url":"https://a.example","rate_limit":{"per_second":1,"per_minute":1}}`, 422, "rate_limit"},
		{"no rate", http.MethodPost, "/v1/endpoints", `{"url":"https://a.example","rate_limit":{"burst":3}}`, 422, "rate_limit"},
		{"negative rate", http.MethodPost, "/v1/endpoints", `{"url":"https://a.example","rate_limit":{"per_second":-1}}`, 422, "rate_limit.per_second"},
		{"zero burst", http.MethodPost, "/v1/endpoints", `{"url":"https://a.example","rate_limit":{"per_second":5,"burst":0}}`, 422, "rate_limit.burst"},
		{"rate unknown field", http.MethodPost, "/v1/endpoints", `{"url":"https://a.example","rate_limit":{"per_hour":5}}`, 422, "rate_limit"},
		{"rate wrong type", http.MethodPost, "/v1/endpoints", `{"url":"https://a.example","rate_limit":"fast"}`, 422, "rate_limit"},
		{"reserved header", http.MethodPost, "/v1/endpoints", `{"url":"https://a.example","headers":{"webhook-id":"x"}}`, 422, "headers.webhook-id"},
		{"bad header name", http.MethodPost, "/v1/endpoints", `{"url":"https://a.example","headers":{"a b":"x"}}`, 422, "headers.a b"},
		{"bad header value", http.MethodPost, "/v1/endpoints", `{"url":"https://a.example","headers":{"X-A":"x\ny"}}`, 422, "headers.X-A"},
		{"patch malformed", http.MethodPatch, epPath, `{`, 400, ""},
		{"patch unknown field", http.MethodPatch, epPath, `{"secret":"whsec_x"}`, 422, "secret"},
		{"patch empty url", http.MethodPatch, epPath, `{"url":""}`, 422, "url"},
		{"malformed endpoint id", http.MethodGet, "/v1/endpoints/not-a-uuid", nil, 404, ""},
		{"malformed id patch", http.MethodPatch, "/v1/endpoints/123", `{}`, 404, ""},
		{"malformed id delete", http.MethodDelete, "/v1/endpoints/%20", nil, 404, ""},
		{"unknown endpoint id", http.MethodGet, "/v1/endpoints/0190b5a4-0000-7000-8000-000000000000", nil, 404, ""},
		{"malformed subscription id", http.MethodGet, "/v1/subscriptions/zzz", nil, 404, ""},
		{"bad limit", http.MethodGet, "/v1/endpoints?limit=0", nil, 422, "limit"},
		{"huge limit", http.MethodGet, "/v1/endpoints?limit=501", nil, 422, "limit"},
		{"text limit", http.MethodGet, "/v1/endpoints?limit=ten", nil, 422, "limit"},
		{"bad cursor", http.MethodGet, "/v1/endpoints?cursor=not-a-cursor", nil, 422, "cursor"},
		{"bad filter id", http.MethodGet, "/v1/subscriptions?endpoint_id=nope", nil, 422, "endpoint_id"},
		{"subscription no endpoint", http.MethodPost, "/v1/subscriptions", `{"event_types":["*"]}`, 422, "endpoint_id"},
		{"subscription bad endpoint id", http.MethodPost, "/v1/subscriptions", `{"endpoint_id":"x","event_types":["*"]}`, 422, "endpoint_id"},
		{"subscription unknown endpoint", http.MethodPost, "/v1/subscriptions", `{"endpoint_id":"0190b5a4-0000-7000-8000-000000000000","event_types":["*"]}`, 404, ""},
		{"subscription no types", http.MethodPost, "/v1/subscriptions", `{"endpoint_id":"` + ep + `","event_types":[]}`, 422, "event_types"},
		{"subscription bad pattern", http.MethodPost, "/v1/subscriptions", `{"endpoint_id":"` + ep + `","event_types":["a.*.b"]}`, 422, "event_types"},
		{"subscription wrong type", http.MethodPost, "/v1/subscriptions", `{"endpoint_id":"` + ep + `","event_types":"*"}`, 422, "event_types"},
		{"oversize body", http.MethodPost, "/v1/endpoints", `{"url":"https://a.example","description":"` + strings.Repeat("a", 9<<20) + `"}`, 413, ""},
		// The host as the dialler reads it (private targets are allowed here).
		{"dotless decimal host", http.MethodPost, "/v1/endpoints", `{"url":"http://2130706433:19999/x"}`, 422, "url"},
		{"octal host", http.MethodPost, "/v1/endpoints", `{"url":"http://0177.0.0.1:19999/"}`, 422, "url"},
		{"hex host", http.MethodPost, "/v1/endpoints", `{"url":"http://0x7f.1/"}`, 422, "url"},
		{"full-width metadata host", http.MethodPost, "/v1/endpoints", `{"url":"http://１６９.２５４.１６９.２５４/"}`, 422, "url"},
		{"full-width reserved host", http.MethodPost, "/v1/endpoints", `{"url":"https://２４０.0.0.1/"}`, 422, "url"},
		{"patch octal host", http.MethodPatch, epPath, `{"url":"http://0177.0.0.1:19999/"}`, 422, "url"},
		// Sluice's own event types, in any case.
		{"reserved type any case", http.MethodPost, "/v1/events", `{"type":"Sluice.endpoint.disabled","payload":{}}`, 422, "type"},
		{"reserved type in a batch", http.MethodPost, "/v1/events/batch", `{"events":[{"type":"a","payload":{}},{"type":"SLUICE.x","payload":{}}]}`, 422, ""},
		{"reserved event type", http.MethodPut, "/v1/event-types/Sluice.x", `{}`, 422, ""},
		{"unknown route", http.MethodGet, "/v1/nope", nil, 404, ""},
		{"wrong method", http.MethodPut, epPath, `{}`, 405, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do(b.keyA, tc.method, tc.path, tc.body)
			p := requireProblem(t, r, tc.status)
			if tc.field == "" {
				return
			}
			var fields []string
			for _, e := range p["errors"].([]any) {
				fields = append(fields, e.(map[string]any)["field"].(string))
			}
			require.Contains(t, fields, tc.field)
		})
	}
}

// TestDoorRefusesLookAlikes: hosts the dialler would read as another
// address, and Sluice's own event types in another case, are refused at
// the API's door for what they are.
func TestDoorRefusesLookAlikes(t *testing.T) {
	b := setup(t)
	for _, tc := range []struct{ method, path, body, says string }{
		{http.MethodPost, "/v1/endpoints", `{"url":"http://2130706433:19999/x"}`, `would be read as 127.0.0.1`},
		{http.MethodPost, "/v1/endpoints", `{"url":"http://0177.0.0.1:19999/"}`, `would be read as 127.0.0.1`},
		{http.MethodPost, "/v1/endpoints", `{"url":"http://１６９.254.169.254/"}`, `metadata`},
		{http.MethodPost, "/v1/events", `{"type":"Sluice.endpoint.disabled","payload":{}}`, `Sluice's own`},
		{http.MethodPost, "/v1/events/batch", `{"events":[{"type":"a","payload":{}},{"type":"SLUICE.x","payload":{}}]}`, `"events[1].type"`},
		{http.MethodPut, "/v1/event-types/Sluice.x", `{}`, `Sluice's own`},
	} {
		r := b.do(b.keyA, tc.method, tc.path, tc.body)
		requireProblem(t, r, http.StatusUnprocessableEntity)
		require.Contains(t, strings.ToLower(string(r.Body)), strings.ToLower(tc.says), "%s %s %s", tc.method, tc.path, tc.body)
	}
	r := b.do(b.keyA, http.MethodPost, "/v1/endpoints", `{"url":"http://１２７.0.0.1:19999/x"}`)
	require.Equal(t, http.StatusCreated, r.Status, "private targets allowed: full-width digits are 127.0.0.1: %s", r.Body)
}

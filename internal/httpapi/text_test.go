package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTextHygiene sends text Postgres cannot store — invalid UTF-8, NUL,
// unpaired surrogate escapes — in bodies, queries and headers, and checks
// each is refused with a problem naming where it was; and that what
// Postgres can store is accepted byte for byte.
func TestTextHygiene(t *testing.T) {
	b := setup(t)
	cases := []struct {
		name, method, path string
		body               string
		status             int
		want               string // a field the problem names, or part of its detail
	}{
		{"invalid UTF-8 in description", "POST", "/v1/endpoints", "{\"url\":\"https://a.example\",\"description\":\"a\xffb\"}", 400, "not valid UTF-8"},
		{"NUL in description", "POST", "/v1/endpoints", `{"url":"https://a.example","description":"a\u0000b"}`, 422, "description"},
		{"NUL in header name", "POST", "/v1/endpoints", `{"url":"https://a.example","headers":{"X-A\u0000":"b"}}`, 422, `headers.X-A\x00`},
		{"NUL in event type pattern", "POST", "/v1/subscriptions", `{"endpoint_id":"00000000-0000-0000-0000-000000000000","event_types":["a\u0000"]}`, 422, "event_types[0]"},
		{"NUL in coalesce_key", "POST", "/v1/events", `{"type":"a","payload":{},"coalesce_key":"\u0000"}`, 422, "coalesce_key"},
		{"invalid UTF-8 in payload", "POST", "/v1/events", "{\"type\":\"a\",\"payload\":{\"s\":\"\xc3\x28\"}}", 400, "not valid UTF-8"},
		{"lone surrogate in payload", "POST", "/v1/events", `{"type":"a","payload":{"s":"\ud800x"}}`, 400, "surrogate"},
		{"lone low surrogate", "POST", "/v1/events", `{"type":"a","payload":{"s":"\udc00"}}`, 400, "surrogate"},
		{"NUL in batch", "POST", "/v1/events/batch", `{"events":[{"type":"a","payload":{}},{"type":"a","payload":{},"coalesce_key":"k\u0000"}]}`, 422, "events[1].coalesce_key"},
		{"payload array", "POST", "/v1/events", `{"type":"a","payload":[1]}`, 422, "payload"},
		{"payload string", "POST", "/v1/events", `{"type":"a","payload":"x"}`, 422, "payload"},
		{"payload number", "POST", "/v1/events", `{"type":"a","payload":1e999999}`, 422, "payload"},
		{"payload true", "POST", "/v1/events", `{"type":"a","payload":true}`, 422, "payload"},
		{"payload null", "POST", "/v1/events", `{"type":"a","payload":null}`, 422, "payload"},
		{"payload too deep", "POST", "/v1/events", `{"type":"a","payload":{"a":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}}`, 422, "payload"},
		{"batch payload array", "POST", "/v1/events/batch", `{"events":[{"type":"a","payload":{}},{"type":"a","payload":{}},{"type":"a","payload":{}},{"type":"a","payload":[]}]}`, 422, "events[3].payload"},
		{"body nested 10,000 deep", "POST", "/v1/events", strings.Repeat("[", 10001) + strings.Repeat("]", 10001), 400, "depth"},
		{"invalid UTF-8 in query", "GET", "/v1/events?type=%ff", "", 400, "query parameter type is not valid UTF-8"},
		{"NUL in query", "GET", "/v1/events?type=a%00", "", 400, "query parameter type must not contain NUL characters"},
		{"invalid UTF-8 in cursor", "GET", "/v1/deliveries?cursor=%c3", "", 400, "query parameter cursor"},
		{"invalid UTF-8 in path", "GET", "/v1/events/%ff", "", 400, "path"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			p := requireProblem(t, b.do(b.keyA, tc.method, tc.path, body), tc.status)
			require.Contains(t, problemText(p), tc.want)
		})
	}
}

// TestTextAccepted checks that what is valid text is kept as posted:
// surrogate pairs and escaped backslashes inside a payload (a json column,
// stored byte for byte); and that a payload holding an escaped NUL, which
// Postgres would keep but many receivers' strings cannot hold, is refused
// naming the payload, as NUL is in every other text (docs/api.md, "Requests").
func TestTextAccepted(t *testing.T) {
	b := setup(t)
	payload := `{"emoji":"\ud83d\ude00","quote":"\\ud800","slash":"\\u0000"}`
	r := b.do(b.keyA, "POST", "/v1/events", `{"type":"a","payload":`+payload+`}`)
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	got := b.do(b.keyA, "GET", "/v1/events/"+r.JSON(t)["id"].(string), nil)
	require.Contains(t, string(got.Body), `"\ud83d\ude00"`)

	r = b.do(b.keyA, "POST", "/v1/events", `{"type":"a","payload":{"nul":"a\u0000b"}}`)
	require.Equal(t, http.StatusUnprocessableEntity, r.Status, string(r.Body))
	require.Contains(t, string(r.Body), `"field":"payload"`)
}

// TestIdempotencyKeyText checks the Idempotency-Key header, including a NUL
// no HTTP client would send (so the handler is called directly).
func TestIdempotencyKeyText(t *testing.T) {
	b := setup(t)
	for _, key := range []string{"k\xff", "k\x00"} {
		req := httptest.NewRequest("POST", "/v1/events", strings.NewReader(`{"type":"a","payload":{}}`))
		req.Header.Set("Authorization", "Bearer "+b.keyA)
		req.Header.Set("Content-Type", "application/json")
		req.Header["Idempotency-Key"] = []string{key}
		rec := httptest.NewRecorder()
		b.handler.ServeHTTP(rec, req)
		require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
		require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
		require.Contains(t, rec.Body.String(), "header Idempotency-Key")
	}
}

// problemText is a problem's detail and the fields it names, one a line.
func problemText(p map[string]any) string {
	out := []string{p["detail"].(string)}
	errs, _ := p["errors"].([]any)
	for _, e := range errs {
		out = append(out, e.(map[string]any)["field"].(string))
	}
	return strings.Join(out, "\n")
}

package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// member is one name and its (valid) raw JSON value.
type member struct{ name, value string }

// object writes members as a JSON object, in order.
func object(members []member) string {
	parts := make([]string, len(members))
	for i, m := range members {
		parts[i] = `"` + m.name + `":` + m.value
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// TestFieldNamesAreExact: for every field of every request body, a name
// that differs only in case is an unknown field (422) and a name given
// twice in one object is malformed JSON (400), with the field named, and
// nothing is done. encoding/json alone would match "URL" to url and let
// the last of two "url"s win.
func TestFieldNamesAreExact(t *testing.T) {
	b := setup(t)
	b.putConsumer(b.keyA, "c1", nil)
	ep := b.createEndpoint(b.keyA, nil)["id"].(string)

	rate := []member{{"per_second", "5"}, {"burst", "2"}}
	endpoint := []member{
		{"url", `"https://example.com/a"`}, {"description", `"d"`}, {"rate_limit", object(rate)},
		{"max_in_flight", "2"}, {"headers", `{"X-A":"1"}`}, {"disabled", "false"},
	}
	event := []member{
		{"type", `"order.created"`}, {"payload", `{"id":1}`}, {"coalesce_key", `"k"`}, {"consumer", `"c1"`},
	}
	cases := []struct {
		method, path string
		members      []member
		wrap         func(string) string // puts the object where it goes in the body
		prefix       string              // the object's path in the body
	}{
		{"POST", "/v1/endpoints", append(endpoint, member{"consumer", `"c1"`}), nil, ""},
		{"PATCH", "/v1/endpoints/" + ep, endpoint, nil, ""},
		{"POST", "/v1/endpoints", rate, func(o string) string { return `{"url":"https://example.com/r","rate_limit":` + o + `}` }, "rate_limit."},
		{"POST", "/v1/subscriptions", []member{{"endpoint_id", `"` + ep + `"`}, {"event_types", `["*"]`}}, nil, ""},
		{"POST", "/v1/events", event, nil, ""},
		{"POST", "/v1/events", []member{{"type", `"order.created"`}, {"broadcast", "true"}, {"payload", `{}`}}, nil, ""},
		{"POST", "/v1/events/batch", event, func(o string) string { return `{"events":[{"type":"a","payload":{}},` + o + `]}` }, "events[1]."},
		{"POST", "/v1/events/batch", []member{{"events", `[{"type":"a","payload":{}}]`}}, nil, ""},
		{"PUT", "/v1/event-types/order.created", []member{
			{"description", `"d"`}, {"schema", `{"type":"object"}`}, {"example", `{"a":1}`}, {"deprecated", "false"},
		}, nil, ""},
		{"POST", "/v1/api-keys", []member{{"name", `"ci"`}, {"expires_at", `"2999-01-01T00:00:00Z"`}}, nil, ""},
		{"PUT", "/v1/consumers/c2", []member{{"name", `"C"`}, {"alert_email", `"ops@example.com"`}}, nil, ""},
		{"POST", "/v1/consumers/c1/portal", []member{{"ttl_seconds", "60"}, {"read_only", "true"}}, nil, ""},
		{"POST", "/v1/endpoints/" + ep + "/replay", []member{
			{"status", `"dead"`}, {"since", `"2020-01-01T00:00:00Z"`}, {"until", `"2999-01-01T00:00:00Z"`},
		}, nil, ""},
	}
	for _, tc := range cases {
		wrap := tc.wrap
		if wrap == nil {
			wrap = func(o string) string { return o }
		}
		// The body as given is accepted, so each refusal below is the
		// name's doing. (Endpoints and keys it creates are harmless.)
		ok := b.do(b.keyA, tc.method, tc.path, wrap(object(tc.members)))
		require.Less(t, ok.Status, 300, "%s %s: %s", tc.method, tc.path, ok.Body)

		for i, m := range tc.members {
			for _, variant := range []string{strings.ToUpper(m.name), strings.ToUpper(m.name[:1]) + m.name[1:]} {
				if variant == m.name {
					continue
				}
				changed := append([]member{}, tc.members...)
				changed[i].name = variant
				r := b.do(b.keyA, tc.method, tc.path, wrap(object(changed)))
				p := requireProblem(t, r, http.StatusUnprocessableEntity)
				require.Contains(t, string(r.Body), `"field":"`+tc.prefix+variant+`"`, "%s %s %s", tc.method, tc.path, variant)
				require.Contains(t, p["errors"].([]any)[0].(map[string]any)["message"], `did you mean "`+m.name+`"`)
			}
			twice := append(append([]member{}, tc.members...), m)
			r := b.do(b.keyA, tc.method, tc.path, wrap(object(twice)))
			p := requireProblem(t, r, http.StatusBadRequest)
			require.Equal(t, "https://sluice.dev/problems/malformed-json", p["type"])
			require.Contains(t, p["detail"], tc.prefix+m.name+" is given twice", "%s %s", tc.method, tc.path)
		}
	}

	// Names are compared once unescaped; payloads are held to it too, since
	// they are delivered byte for byte and a receiver may read the first.
	for body, detail := range map[string]string{
		`{"type":"a","payload":{},"\u0074ype":"b"}`:                            "type is given twice",
		`{"type":"a","payload":{"amount":1,"x":{},"amount":-5}}`:               "payload.amount is given twice",
		`{"type":"a","payload":{"lines":[{"sku":"a"},{"sku":"b","sku":"c"}]}}`: "payload.lines[1].sku is given twice",
	} {
		p := requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/events", body), http.StatusBadRequest)
		require.Contains(t, p["detail"], detail, body)
	}
	r := b.do(b.keyA, http.MethodPost, "/v1/events", `{"type":"a","payload":{"Amount":1,"amount":2,"x":[{"a":1},{"a":1}]}}`)
	require.Equal(t, http.StatusAccepted, r.Status, "a payload's own names are the tenant's: case matters, repeats across objects are fine: %s", r.Body)

	// The probe's cases: no endpoint at b.example, no event routed by "CONSUMER".
	r = b.do(b.keyA, http.MethodPost, "/v1/endpoints", `{"url":"https://a.example/","URL":"https://b.example/"}`)
	requireProblem(t, r, http.StatusUnprocessableEntity)
	r = b.do(b.keyA, http.MethodPost, "/v1/events", `{"type":"a","payload":{},"CONSUMER":"c1"}`)
	requireProblem(t, r, http.StatusUnprocessableEntity)
	r = b.do(b.keyA, http.MethodPost, "/v1/endpoints", `{"url":"https://example.com/x","di\u017fabled":true}`)
	requireProblem(t, r, http.StatusUnprocessableEntity) // U+017F folds to "s" in encoding/json
}

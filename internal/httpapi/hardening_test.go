package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/send"
)

// requireField checks that r is a 422 naming field, and returns the message.
func requireField(t *testing.T, r response, field string) string {
	t.Helper()
	p := requireProblem(t, r, http.StatusUnprocessableEntity)
	for _, e := range p["errors"].([]any) {
		if fe := e.(map[string]any); fe["field"] == field {
			return fe["message"].(string)
		}
	}
	require.Failf(t, "field not named", "%s not in %s", field, r.Body)
	return ""
}

func TestHeaderRules(t *testing.T) {
	b := setup(t)
	post := func(headers map[string]any) response {
		return b.do(b.keyA, http.MethodPost, "/v1/endpoints", map[string]any{"url": "https://a.example", "headers": headers})
	}
	// Every reserved header, in any case, is refused by name: the same list
	// the sender drops.
	for _, h := range send.ReservedHeaders {
		for _, name := range []string{h, lower(h)} {
			msg := requireField(t, post(map[string]any{name: "x"}), "headers."+name)
			require.Contains(t, msg, "cannot be set")
		}
	}
	for _, h := range []string{"Keep-Alive", "Proxy-Connection", "Trailer", "Expect", "Proxy-Authorization"} {
		requireField(t, post(map[string]any{h: "x"}), "headers."+h)
	}
	// Names differing only in case: one could not be sent, so both are refused.
	msg := requireField(t, post(map[string]any{"X-Dup": "1", "x-dup": "2"}), "headers.x-dup")
	require.Contains(t, msg, "X-Dup")
	// Ordinary headers (Authorization included) are fine.
	r := post(map[string]any{"Authorization": "Bearer t", "X-Tenant": "acme"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	id := r.JSON(t)["id"].(string)
	requireField(t, b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, map[string]any{"headers": map[string]any{"expect": "100-continue"}}), "headers.expect")
}

func lower(s string) string {
	out := []byte(s)
	for i, c := range out {
		if c >= 'A' && c <= 'Z' {
			out[i] = c + 'a' - 'A'
		}
	}
	return string(out)
}

func TestPatchNullAndNumbers(t *testing.T) {
	b := setup(t)
	ep := b.createEndpoint(b.keyA, map[string]any{"url": "https://a.example", "description": "keep", "rate_limit": map[string]any{"per_second": 5}})
	path := "/v1/endpoints/" + ep["id"].(string)
	for _, field := range []string{"url", "description", "max_in_flight", "headers", "disabled"} {
		msg := requireField(t, b.do(b.keyA, http.MethodPatch, path, `{"`+field+`":null}`), field)
		require.Contains(t, msg, "must not be null")
	}
	got := b.do(b.keyA, http.MethodGet, path, nil).JSON(t)
	require.Equal(t, "keep", got["description"], "nothing changed")
	require.Equal(t, "https://a.example", got["url"])

	for body, field := range map[string]string{
		`{"rate_limit":{"per_second":1.5}}`:           "rate_limit.per_second",
		`{"rate_limit":{"per_minute":1e12}}`:          "rate_limit.per_minute",
		`{"rate_limit":{"per_second":2,"burst":0.5}}`: "rate_limit.burst",
		`{"rate_limit":{"per_second":0}}`:             "rate_limit.per_second",
		`{"max_in_flight":2.5}`:                       "max_in_flight",
		`{"max_in_flight":1e30}`:                      "max_in_flight",
		`{"max_in_flight":0}`:                         "max_in_flight",
	} {
		msg := requireField(t, b.do(b.keyA, http.MethodPatch, path, body), field)
		require.Contains(t, msg, "must be a whole number from 1 to", body)
	}
	// null still removes the rate limit.
	r := b.do(b.keyA, http.MethodPatch, path, `{"rate_limit":null}`)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Nil(t, r.JSON(t)["rate_limit"])
}

func TestMetadataURLRefusedWithPrivateTargets(t *testing.T) {
	b := setup(t) // private targets allowed
	for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/latest/", "http://[::ffff:169.254.169.254]/", "http://100.100.100.200/"} {
		msg := requireField(t, b.do(b.keyA, http.MethodPost, "/v1/endpoints", map[string]any{"url": u}), "url")
		require.Contains(t, msg, "metadata", u)
	}
	b.createEndpoint(b.keyA, map[string]any{"url": "http://127.0.0.1:9/hook"})
	b.createEndpoint(b.keyA, map[string]any{"url": "http://[fd00::1]:9/hook"})
}

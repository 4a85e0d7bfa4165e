package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEndpointLifecycle(t *testing.T) {
	b := setup(t)

	ep := b.createEndpoint(b.keyA, map[string]any{
		"url":           "https://example.com/hooks",
		"description":   "orders",
		"rate_limit":    map[string]any{"per_second": 20, "burst": 5},
		"max_in_flight": 4,
		"headers":       map[string]string{"X-Team": "billing"},
	})
	id := ep["id"].(string)
	require.True(t, strings.HasPrefix(ep["secret"].(string), "whsec_"))
	require.Equal(t, map[string]any{"per_second": float64(20), "burst": float64(5)}, ep["rate_limit"])
	require.EqualValues(t, 4, ep["max_in_flight"])
	require.Equal(t, "active", ep["status"])
	require.Equal(t, "closed", ep["circuit"].(map[string]any)["state"])

	got := b.do(b.keyA, http.MethodGet, "/v1/endpoints/"+id, nil).JSON(t)
	require.NotContains(t, got, "secret", "the secret is only shown on create and by /secret")
	require.Equal(t, "orders", got["description"])

	secret := b.do(b.keyA, http.MethodGet, "/v1/endpoints/"+id+"/secret", nil).JSON(t)
	require.Equal(t, ep["secret"], secret["secret"])

	// Default burst for per_minute is 1; null removes the limit again.
	r := b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, map[string]any{"rate_limit": map[string]any{"per_minute": 90}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Equal(t, map[string]any{"per_minute": float64(90), "burst": float64(1)}, r.JSON(t)["rate_limit"])
	require.Equal(t, "orders", r.JSON(t)["description"], "PATCH keeps fields it does not name")

	r = b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, map[string]any{"rate_limit": nil, "disabled": true})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Nil(t, r.JSON(t)["rate_limit"])
	require.Equal(t, "disabled", r.JSON(t)["status"])

	rotated := b.do(b.keyA, http.MethodPost, "/v1/endpoints/"+id+"/secret/rotate", nil)
	require.Equal(t, http.StatusOK, rotated.Status)
	require.NotEqual(t, ep["secret"], rotated.JSON(t)["secret"])
	secret = b.do(b.keyA, http.MethodGet, "/v1/endpoints/"+id+"/secret", nil).JSON(t)
	require.Equal(t, rotated.JSON(t)["secret"], secret["secret"])

	sub := b.do(b.keyA, http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": id, "event_types": []string{"order.created", "video.*"}})
	require.Equal(t, http.StatusCreated, sub.Status, string(sub.Body))
	subID := sub.JSON(t)["id"].(string)
	require.Equal(t, http.StatusOK, b.do(b.keyA, http.MethodGet, "/v1/subscriptions/"+subID, nil).Status)

	require.Equal(t, http.StatusNoContent, b.do(b.keyA, http.MethodDelete, "/v1/endpoints/"+id, nil).Status)
	requireProblem(t, b.do(b.keyA, http.MethodGet, "/v1/endpoints/"+id, nil), http.StatusNotFound)
	requireProblem(t, b.do(b.keyA, http.MethodGet, "/v1/subscriptions/"+subID, nil), http.StatusNotFound)
	requireProblem(t, b.do(b.keyA, http.MethodDelete, "/v1/endpoints/"+id, nil), http.StatusNotFound)
}

func TestSubscriptionLifecycle(t *testing.T) {
	b := setup(t)
	ep1 := b.createEndpoint(b.keyA, nil)["id"].(string)
	ep2 := b.createEndpoint(b.keyA, nil)["id"].(string)
	for _, ep := range []string{ep1, ep1, ep2} {
		r := b.do(b.keyA, http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": ep, "event_types": []string{"*"}})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	}
	list := b.do(b.keyA, http.MethodGet, "/v1/subscriptions?endpoint_id="+ep1, nil).JSON(t)
	require.Len(t, list["data"], 2)
	list = b.do(b.keyA, http.MethodGet, "/v1/subscriptions", nil).JSON(t)
	require.Len(t, list["data"], 3)
	require.Nil(t, list["next_cursor"])

	id := list["data"].([]any)[0].(map[string]any)["id"].(string)
	require.Equal(t, http.StatusNoContent, b.do(b.keyA, http.MethodDelete, "/v1/subscriptions/"+id, nil).Status)
	requireProblem(t, b.do(b.keyA, http.MethodDelete, "/v1/subscriptions/"+id, nil), http.StatusNotFound)
}

// TestAdaptiveRateLimit: rate_limit takes adaptive and min, refuses a bad
// min naming the field, and the endpoint shows effective_rate (the
// configured rate until a receiver slows it down; null when not adaptive).
func TestAdaptiveRateLimit(t *testing.T) {
	b := setup(t)
	ep := b.createEndpoint(b.keyA, map[string]any{
		"url":        "https://example.com/hooks",
		"rate_limit": map[string]any{"per_second": 100, "adaptive": true, "min": 2.5},
	})
	id := ep["id"].(string)
	require.Equal(t, map[string]any{"per_second": float64(100), "burst": float64(100), "adaptive": true, "min": 2.5}, ep["rate_limit"])
	require.InDelta(t, 100.0, ep["effective_rate"], 1e-9)

	got := b.do(b.keyA, http.MethodGet, "/v1/endpoints/"+id, nil).JSON(t)
	require.InDelta(t, 100.0, got["effective_rate"], 1e-9)
	require.Equal(t, true, got["rate_limit"].(map[string]any)["adaptive"])

	r := b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, map[string]any{"rate_limit": map[string]any{"per_minute": 120, "adaptive": true}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.InDelta(t, 2.0, r.JSON(t)["effective_rate"], 1e-9, "a changed rate: effective_rate follows it")

	r = b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, map[string]any{"rate_limit": map[string]any{"per_second": 10}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Nil(t, r.JSON(t)["effective_rate"], "not adaptive")
	require.NotContains(t, r.JSON(t)["rate_limit"], "adaptive")

	for body, field := range map[string]string{
		`{"rate_limit":{"per_second":10,"adaptive":true,"min":0}}`:   "rate_limit.min",
		`{"rate_limit":{"per_second":10,"adaptive":true,"min":-1}}`:  "rate_limit.min",
		`{"rate_limit":{"per_second":10,"adaptive":true,"min":11}}`:  "rate_limit.min",
		`{"rate_limit":{"per_second":10,"min":2}}`:                   "rate_limit.min",
		`{"rate_limit":{"per_second":10,"adaptive":true,"min":"2"}}`: "rate_limit.min",
		`{"rate_limit":{"per_second":10,"adaptive":"yes"}}`:          "rate_limit.adaptive",
	} {
		requireField(t, b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, body), field)
	}
}

// TestBacklogAlertField: backlog_alert takes queued and/or oldest_seconds,
// null removes it, PATCH without it keeps it, and a bad one is refused
// naming the field.
func TestBacklogAlertField(t *testing.T) {
	b := setup(t)
	ep := b.createEndpoint(b.keyA, map[string]any{"url": "https://example.com/hooks", "backlog_alert": map[string]any{"queued": 1000}})
	id := ep["id"].(string)
	require.Equal(t, map[string]any{"queued": 1000.0}, ep["backlog_alert"])

	patch := func(body any) map[string]any {
		r := b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, body)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		return r.JSON(t)
	}
	both := map[string]any{"queued": 10, "oldest_seconds": 300}
	require.Equal(t, map[string]any{"queued": 10.0, "oldest_seconds": 300.0}, patch(map[string]any{"backlog_alert": both})["backlog_alert"])
	require.Equal(t, map[string]any{"queued": 10.0, "oldest_seconds": 300.0}, patch(map[string]any{"description": "kept"})["backlog_alert"])
	require.Nil(t, patch(map[string]any{"backlog_alert": nil})["backlog_alert"])

	for body, field := range map[string]string{
		`{"backlog_alert":{}}`:                         "backlog_alert",
		`{"backlog_alert":{"queued":0}}`:               "backlog_alert.queued",
		`{"backlog_alert":{"queued":1.5}}`:             "backlog_alert.queued",
		`{"backlog_alert":{"queued":99999999999}}`:     "backlog_alert.queued",
		`{"backlog_alert":{"oldest_seconds":-3}}`:      "backlog_alert.oldest_seconds",
		`{"backlog_alert":{"oldest_seconds":9999999}}`: "backlog_alert.oldest_seconds",
		`{"backlog_alert":{"queued":"5"}}`:             "backlog_alert.queued",
		`{"backlog_alert":{"queued":null}}`:            "backlog_alert.queued",
		`{"backlog_alert":{"Queued":5}}`:               "backlog_alert.Queued",
		`{"backlog_alert":{"depth":5}}`:                "backlog_alert",
		`{"backlog_alert":5}`:                          "backlog_alert",
	} {
		requireField(t, b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, body), field)
	}
}

package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDeliveryOptionsFields(t *testing.T) {
	b := setup(t)
	plain := b.createEndpoint(b.keyA, map[string]any{"url": "https://example.com/plain"})
	require.Contains(t, plain, "timeout_seconds", "an option is shown, null for the default")
	require.Nil(t, plain["timeout_seconds"])
	require.Nil(t, plain["retry_schedule"])

	ep := b.createEndpoint(b.keyA, map[string]any{"url": "https://example.com/hooks",
		"timeout_seconds": 20, "retry_schedule": []string{"30s", "5m", "1h30m"}})
	id := ep["id"].(string)
	require.EqualValues(t, 20, ep["timeout_seconds"])
	require.Equal(t, []any{"30s", "5m0s", "1h30m0s"}, ep["retry_schedule"], "as Go prints a duration")

	patch := func(body string) map[string]any {
		r := b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, body)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		return r.JSON(t)
	}
	got := patch(`{"description": "kept options"}`)
	require.EqualValues(t, 20, got["timeout_seconds"], "PATCH keeps the options it does not name")
	got = patch(`{"timeout_seconds": null, "retry_schedule": []}`)
	require.Nil(t, got["timeout_seconds"], "null: the server's default again")
	require.Equal(t, []any{}, got["retry_schedule"])

	for body, field := range map[string]string{
		`{"timeout_seconds": 0}`:               "timeout_seconds",
		`{"timeout_seconds": 61}`:              "timeout_seconds",
		`{"timeout_seconds": 2.5}`:             "timeout_seconds",
		`{"timeout_seconds": "10"}`:            "timeout_seconds",
		`{"retry_schedule": "5s"}`:             "retry_schedule",
		`{"retry_schedule": ["5s", "later"]}`:  "retry_schedule",
		`{"retry_schedule": ["169h"]}`:         "retry_schedule",
		`{"retry_schedule": [{"wait": "5s"}]}`: "retry_schedule",
	} {
		requireField(t, b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, body), field)
	}
	requireField(t, b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, `{"Timeout_Seconds": 5}`), "Timeout_Seconds")
	r := b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, `{"timeout_seconds": 5, "timeout_seconds": 6}`)
	require.Equal(t, http.StatusBadRequest, r.Status, "a name given twice: %s", r.Body)
}

package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBatchDecoding covers the batch body, read one event at a time, with
// the rules of every other body.
func TestBatchDecoding(t *testing.T) {
	b := setup(t)
	event := `{"type":"a","payload":{}}`
	for _, tc := range []struct {
		body   string
		status int
		field  string
	}{
		{`{"events":5}`, 422, "events"},
		{`[]`, 422, "(body)"},
		{`{"events":[1]}`, 422, "events[0]"},
		{`{"events":[` + event + `,{"type":"a","payload":{},"x":1}]}`, 422, "events[1].x"},
		{`{"events":[{"type":5,"payload":{}}]}`, 422, "events[0].type"},
		{`{"events":[` + event + `],"more":1}`, 422, "more"},
		{`{"events":null}`, 422, "events"},
		{`{"events":[` + strings.Repeat(event+",", 1000) + event + `]}`, 422, "events"},
		{`{"events":[` + event + `]} {}`, 400, ""},
		{`{"events":[` + event, 400, ""},
		{`{"events":[{"type":"a","payload":{"s":"\ud800"}}]}`, 400, ""},
	} {
		r := b.do(b.keyA, http.MethodPost, "/v1/events/batch", tc.body)
		p := requireProblem(t, r, tc.status)
		if tc.field != "" {
			require.Equal(t, tc.field, p["errors"].([]any)[0].(map[string]any)["field"], "%.80s: %s", tc.body, r.Body)
		}
	}
	r := b.do(b.keyA, http.MethodPost, "/v1/events/batch", fmt.Sprintf(`{"events":[%s,%s]}`, event, event))
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	require.Len(t, r.JSON(t)["data"], 2)
}

// TestBatchRefusesIdempotencyKey: a key on a batch is refused before the
// body is read, and nothing is created; a repeat would not be recognised.
func TestBatchRefusesIdempotencyKey(t *testing.T) {
	b := setup(t)
	for _, key := range []string{"k-1", ""} {
		req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/v1/events/batch", strings.NewReader(`{"events":[{"type":"a","payload":{}}]}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+b.keyA)
		req.Header.Set("Content-Type", "application/json")
		req.Header["Idempotency-Key"] = []string{key}
		res, err := b.srv.Client().Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusBadRequest, res.StatusCode, string(body))
		require.Contains(t, string(body), "Idempotency-Key is not accepted on a batch")
	}
	require.Empty(t, b.do(b.keyA, http.MethodGet, "/v1/events", nil).JSON(t)["data"])
}

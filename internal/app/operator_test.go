package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
)

const operatorToken = "op_0123456789abcdefghijklmnopqrstuvwxyz"

// get sends GET path to the harness's server with an Authorization header
// (none when empty) and returns the status and body.
func (h *harness) get(path, authorization string, headers ...string) (int, string) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.srv.URL+path, nil)
	require.NoError(h.t, err)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := h.srv.Client().Do(req)
	require.NoError(h.t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(h.t, err)
	return res.StatusCode, string(body)
}

func basic(password string) string {
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.SetBasicAuth("operator", password)
	return req.Header.Get("Authorization")
}

// TestOperatorRiverUI: River's UI and its JSON API answer the operator
// token (Basic or Bearer) and nothing else, a tenant's API key included.
func TestOperatorRiverUI(t *testing.T) {
	h := startWith(t, map[string]string{"SLUICE_OPERATOR_TOKEN": operatorToken}, app.Roles{API: true, Dashboard: true})
	var ev struct{ ID string }
	// A coalesced event is fanned out by a job; with no worker it stays available.
	h.call(http.MethodPost, "/v1/events", map[string]any{"type": "order.created", "payload": map[string]any{"n": 1}, "coalesce_key": "o1"},
		http.StatusAccepted, &ev)
	eventID := ev.ID

	for _, path := range []string{"/riverui/", "/riverui/api/jobs?state=available"} {
		for name, auth := range map[string]string{
			"none":                 "",
			"wrong password":       basic(operatorToken + "x"),
			"wrong bearer":         "Bearer " + strings.ToUpper(operatorToken),
			"tenant key as bearer": "Bearer " + h.key,
			"tenant key as basic":  basic(h.key),
		} {
			status, _ := h.get(path, auth)
			require.Equal(t, http.StatusUnauthorized, status, "%s with %s", path, name)
		}
	}
	status, body := h.get("/riverui/", basic(operatorToken))
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "<html")

	status, body = h.get("/riverui/api/jobs?state=available", "Bearer "+operatorToken)
	require.Equal(t, http.StatusOK, status, body)
	var jobs struct {
		Data []struct {
			Kind string          `json:"kind"`
			Args json.RawMessage `json:"args"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &jobs), body)
	require.NotEmpty(t, jobs.Data, body)
	require.Equal(t, "fanout", jobs.Data[0].Kind)
	require.Contains(t, string(jobs.Data[0].Args), eventID)

	status, body = h.get("/riverui/api/queues", basic(operatorToken))
	require.Equal(t, http.StatusOK, status, body)
}

// TestOperatorRiverUIRefusesCrossSiteWrites: a browser holding the Basic
// credentials cannot be made to cancel or delete jobs from another site.
func TestOperatorRiverUIRefusesCrossSiteWrites(t *testing.T) {
	h := startWith(t, map[string]string{"SLUICE_OPERATOR_TOKEN": operatorToken}, app.Roles{API: true})
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/riverui/api/jobs/cancel", strings.NewReader(`{"ids":["1"]}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", basic(operatorToken))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	res, err := h.srv.Client().Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusForbidden, res.StatusCode)
}

// TestOperatorRiverUIUnsetIsNotServed: without SLUICE_OPERATOR_TOKEN the
// UI is not mounted at all.
func TestOperatorRiverUIUnsetIsNotServed(t *testing.T) {
	h := startWith(t, nil, app.Roles{API: true, Dashboard: true})
	for _, path := range []string{"/riverui/", "/riverui/api/jobs"} {
		status, _ := h.get(path, basic(operatorToken))
		require.Equal(t, http.StatusNotFound, status, path)
		status, _ = h.get(path, "Bearer "+h.key)
		require.Equal(t, http.StatusNotFound, status, path)
	}
}

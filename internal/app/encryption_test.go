package app_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

const pgDump = "/usr/lib/postgresql/15/bin/pg_dump"

// dump is a pg_dump of the harness's database, as text.
func (h *harness) dump() string {
	h.t.Helper()
	out, err := exec.CommandContext(h.t.Context(), pgDump, "--no-owner", "--dbname", h.dbURL).Output()
	require.NoError(h.t, err)
	require.Contains(h.t, string(out), "CREATE TABLE public.events", "a whole dump")
	return string(out)
}

// offProcess starts an API process on the harness's database with payload
// encryption off, as Sluice ran before it was turned on, and returns its
// server.
func (h *harness) offProcess() *httptest.Server {
	h.t.Helper()
	env := h.env
	h.env = map[string]string{}
	for k, v := range env {
		h.env[k] = v
	}
	h.env["SLUICE_PAYLOAD_ENCRYPTION"] = "off"
	p := h.process(app.Roles{API: true})
	h.env = env
	srv := httptest.NewServer(p.Handler)
	h.t.Cleanup(srv.Close)
	return srv
}

// notes are the distinctive "note" strings of the payloads in reqs, sorted.
func notes(t *testing.T, reqs []receiver.Request) []string {
	t.Helper()
	var out []string
	for _, r := range reqs {
		require.True(t, r.Verified, "signed")
		var body struct {
			Data struct{ Note, Region string }
		}
		require.NoError(t, json.Unmarshal(r.Body, &body))
		out = append(out, body.Data.Note+"/"+body.Data.Region)
	}
	sort.Strings(out)
	return out
}

func TestPayloadEncryptionAtRest(t *testing.T) {
	const (
		payloadText = "pay-CRIMSON-4409"
		bodyText    = "resp-VIOLET-7731"
		headerText  = "hdr-AMBER-5520"
		clearText   = "legacy-CLEAR-1188"
	)
	h := start(t, map[string]string{"SLUICE_PAYLOAD_ENCRYPTION": "on"})
	all, eu := receiver.New(t), receiver.New(t)
	all.Answer(receiver.Behavior{Body: bodyText})
	allID, _ := h.endpoint(all, []string{"order.*"}, map[string]any{"headers": map[string]string{"X-Team": headerText}})
	euID, _ := h.endpoint(eu, nil, nil)
	h.call(http.MethodPost, "/v1/subscriptions", map[string]any{
		"endpoint_id": euID, "event_types": []string{"order.*"}, "filter": map[string]any{"region": "eu"},
	}, http.StatusCreated, nil)
	h.call(http.MethodPut, "/v1/event-types/order.checked", map[string]any{"schema": map[string]any{
		"type": "object", "required": []string{"amount"}, "properties": map[string]any{"amount": map[string]any{"type": "number"}},
	}}, http.StatusCreated, nil)

	// A row stored before encryption was on: clear, and still read.
	on := h.srv
	h.srv = h.offProcess()
	legacyID := h.post("order.legacy", map[string]any{"note": clearText, "region": "eu"})
	h.srv = on

	euID1 := h.post("order.created", map[string]any{"note": payloadText, "region": "eu"})
	h.post("order.created", map[string]any{"note": payloadText, "region": "us"})
	var coalesced struct{ ID string }
	h.call(http.MethodPost, "/v1/events", map[string]any{"type": "order.updated", "coalesce_key": "k1",
		"payload": map[string]any{"note": payloadText + "-k", "region": "eu"}}, http.StatusAccepted, &coalesced)
	h.call(http.MethodPost, "/v1/events/batch", map[string]any{"events": []map[string]any{
		{"type": "order.created", "payload": map[string]any{"note": payloadText + "-b", "region": "eu"}},
		{"type": "order.created", "payload": map[string]any{"note": payloadText + "-b", "region": "us"}},
	}}, http.StatusAccepted, nil)
	h.call(http.MethodPost, "/v1/events", map[string]any{"type": "order.checked", "payload": map[string]any{"note": payloadText}},
		http.StatusUnprocessableEntity, nil)
	h.post("order.checked", map[string]any{"note": payloadText + "-s", "amount": 3, "region": "us"})
	h.settle()

	require.Equal(t, []string{
		clearText + "/eu", payloadText + "-b/eu", payloadText + "-b/us", payloadText + "-k/eu",
		payloadText + "-s/us", payloadText + "/eu", payloadText + "/us",
	}, notes(t, all.Requests()), "every event arrives intact and signed")
	for _, r := range all.Requests() {
		require.Equal(t, headerText, r.Header.Get("X-Team"))
	}
	require.Equal(t, []string{clearText + "/eu", payloadText + "-b/eu", payloadText + "-k/eu", payloadText + "/eu"},
		notes(t, eu.Requests()), "the filter is matched against sealed payloads, inline, in a batch and in a fan-out job")

	var ev struct {
		Payload    map[string]any
		Deliveries []delivery
	}
	h.call(http.MethodGet, "/v1/events/"+euID1, nil, http.StatusOK, &ev)
	require.Equal(t, payloadText, ev.Payload["note"])
	h.call(http.MethodGet, "/v1/events/"+legacyID, nil, http.StatusOK, &ev)
	require.Equal(t, clearText, ev.Payload["note"])
	bodies := 0
	for _, d := range ev.Deliveries {
		var got delivery
		h.call(http.MethodGet, "/v1/deliveries/"+d.ID, nil, http.StatusOK, &got)
		if got.EndpointID == allID {
			require.Equal(t, bodyText, *got.Attempts[0].ResponseBody, "the response body is read back opened")
			bodies++
		}
	}
	require.Equal(t, 1, bodies)
	var ep struct{ Headers map[string]string }
	h.call(http.MethodGet, "/v1/endpoints/"+allID, nil, http.StatusOK, &ep)
	require.Equal(t, headerText, ep.Headers["X-Team"])

	var page struct {
		Data []struct {
			Payload struct{ Note string }
		}
	}
	h.call(http.MethodGet, "/v1/events?limit=2&filter="+url.QueryEscape(`{"region": "eu"}`), nil, http.StatusOK, &page)
	require.Len(t, page.Data, 2)
	h.call(http.MethodGet, "/v1/events?filter="+url.QueryEscape(`{"region": "eu"}`), nil, http.StatusOK, &page)
	var found []string
	for _, e := range page.Data {
		found = append(found, e.Payload.Note)
	}
	sort.Strings(found)
	require.Equal(t, []string{clearText, payloadText, payloadText + "-b", payloadText + "-k"}, found,
		"search by filter matches sealed and clear payloads")

	dump := h.dump()
	require.Contains(t, dump, clearText, "the dump holds what was stored clear")
	for _, s := range []string{payloadText, bodyText, headerText} {
		require.NotContains(t, dump, s)
	}
	require.Equal(t, 1, strings.Count(dump, "COPY public.tenant_data_keys"))
}

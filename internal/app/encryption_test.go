package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/secretbox"
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

// processWith starts another process on the harness's database with the
// harness's settings but for set ("" unsets one), and returns its server.
func (h *harness) processWith(set map[string]string, roles app.Roles) *httptest.Server {
	h.t.Helper()
	env := h.env
	h.env = map[string]string{}
	for k, v := range env {
		h.env[k] = v
	}
	for k, v := range set {
		h.env[k] = v
	}
	p := h.process(roles)
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
	h.srv = h.processWith(map[string]string{"SLUICE_PAYLOAD_ENCRYPTION": "off"}, app.Roles{API: true})
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
	idem := map[string]any{"type": "order.created", "payload": map[string]any{"note": payloadText + "-i", "region": "us"}}
	var first, second struct{ ID string }
	h.call(http.MethodPost, "/v1/events", idem, http.StatusAccepted, &first, "Idempotency-Key", "k-1")
	h.call(http.MethodPost, "/v1/events", idem, http.StatusAccepted, &second, "Idempotency-Key", "k-1")
	require.Equal(t, first.ID, second.ID, "the same event, compared with its sealed first")
	idem["payload"] = map[string]any{"note": "other"}
	h.call(http.MethodPost, "/v1/events", idem, http.StatusConflict, nil, "Idempotency-Key", "k-1")
	h.settle()

	require.Equal(t, []string{
		clearText + "/eu", payloadText + "-b/eu", payloadText + "-b/us", payloadText + "-i/us", payloadText + "-k/eu",
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

	// An operational event (the eu endpoint disabled by hand) is sealed
	// like any payload, and delivered and read back opened.
	ops := receiver.New(t)
	h.endpoint(ops, []string{"sluice.*"}, nil)
	h.call(http.MethodPatch, "/v1/endpoints/"+euID, map[string]any{"disabled": true}, http.StatusOK, nil)
	require.True(t, ops.Await(30*time.Second, func(reqs []receiver.Request) bool { return len(reqs) > 0 }))
	got := opEvents(t, ops)
	require.Len(t, got, 1)
	require.Equal(t, "sluice.endpoint.disabled", got[0].Type)
	require.Equal(t, "manual", got[0].Data.Reason)
	require.Equal(t, euID, got[0].Data.EndpointID)
	var opPage struct {
		Data []struct{ Payload struct{ Reason string } }
	}
	h.call(http.MethodGet, "/v1/events?type=sluice.endpoint.disabled", nil, http.StatusOK, &opPage)
	require.Len(t, opPage.Data, 1)
	require.Equal(t, "manual", opPage.Data[0].Payload.Reason, "read back opened")

	dump := h.dump()
	require.Contains(t, dump, clearText, "the dump holds what was stored clear")
	for _, s := range []string{payloadText, bodyText, headerText, `"reason": "manual"`} {
		require.NotContains(t, dump, s)
	}
	opRows, table := 0, ""
	for _, line := range strings.Split(dump, "\n") {
		if strings.HasPrefix(line, "COPY ") {
			table = strings.Fields(line)[1]
		}
		if strings.HasPrefix(table, "public.events_") && strings.Contains(line, "\tsluice.endpoint.disabled\t") {
			require.Contains(t, line, `"sealed:1:`, "the operational event's row holds its payload sealed")
			opRows++
		}
	}
	require.Equal(t, 1, opRows, "the operational event is in the dump")
	require.Equal(t, 1, strings.Count(dump, "COPY public.tenant_data_keys"))
}

// newTestKey is the master key TestKeysRotateUnderLoad rotates to.
const newTestKey = "CQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQk="

func TestKeysRotateUnderLoad(t *testing.T) {
	const posts = 200
	ctx := t.Context()
	// 1. Every process opens with the new key too, and seals with the old.
	h := start(t, map[string]string{"SLUICE_PAYLOAD_ENCRYPTION": "on", "SLUICE_PREVIOUS_ENCRYPTION_KEY": newTestKey})
	rcv := receiver.New(t)
	epID, secret := h.endpoint(rcv, []string{"load.*"}, map[string]any{"headers": map[string]string{"X-Team": "rotation"}})
	beforeID := h.post("load.before", map[string]any{"note": "before"})
	for i := range 20 { // other tenants, with data keys wrapped by the old key
		tenant, err := h.proc.Store.CreateTenant(ctx, fmt.Sprintf("T%d", i), "ops@t.test", apikey.Digest(apikey.New()))
		require.NoError(t, err)
		_, err = h.proc.Store.Payloads().SealJSON(ctx, tenant.ID, []byte(`{}`))
		require.NoError(t, err)
	}
	// 2. A process that seals with the new key and opens with both.
	both := h.processWith(map[string]string{"SLUICE_ENCRYPTION_KEY": newTestKey, "SLUICE_PREVIOUS_ENCRYPTION_KEY": testKey},
		app.Roles{API: true, Worker: true})

	// 3. Rotation under a bounded load on both processes.
	var (
		statuses = make([]int, posts)
		ids      = make([]string, posts)
		started  = make(chan struct{})
		wg       sync.WaitGroup
	)
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < posts; i += 4 {
				if i == posts/4 {
					close(started)
				}
				srv := h.srv
				if i%2 == 1 {
					srv = both
				}
				statuses[i], ids[i] = postTo(t, srv.URL, h.key, fmt.Sprintf(`{"type":"load.created","payload":{"i":%d}}`, i))
			}
		})
	}
	<-started
	from, err := secretbox.New(mustKey(t, newTestKey), mustKey(t, testKey))
	require.NoError(t, err)
	to, err := secretbox.New(mustKey(t, newTestKey))
	require.NoError(t, err)
	rotated, err := app.RotateKeys(ctx, h.proc.Store, from, to)
	require.NoError(t, err)
	require.Equal(t, 21, rotated.DataKeys, "every tenant's data key re-wrapped")
	require.Equal(t, 1, rotated.Endpoints)
	wg.Wait()
	for i, s := range statuses {
		require.Equal(t, http.StatusAccepted, s, "post %d", i)
	}
	require.True(t, rcv.Await(60*time.Second, func(reqs []receiver.Request) bool {
		seen := map[string]bool{}
		for _, r := range reqs {
			seen[r.ID] = r.Verified
		}
		for _, id := range ids {
			if !seen[id] {
				return false
			}
		}
		return seen[beforeID]
	}), "every event posted during the rotation arrives, signed")

	// 4. The old key removed: a process with the new key alone reads
	// everything, and nothing is left for the old key to open.
	h.srv = h.processWith(map[string]string{"SLUICE_ENCRYPTION_KEY": newTestKey, "SLUICE_PREVIOUS_ENCRYPTION_KEY": ""}, app.Roles{API: true})
	var ev struct{ Payload map[string]any }
	h.call(http.MethodGet, "/v1/events/"+beforeID, nil, http.StatusOK, &ev)
	require.Equal(t, "before", ev.Payload["note"])
	var first struct{ Payload json.RawMessage }
	h.call(http.MethodGet, "/v1/events/"+ids[0], nil, http.StatusOK, &first)
	require.JSONEq(t, `{"i":0}`, string(first.Payload))
	var ep struct{ Headers map[string]string }
	h.call(http.MethodGet, "/v1/endpoints/"+epID, nil, http.StatusOK, &ep)
	require.Equal(t, "rotation", ep.Headers["X-Team"])
	var sec struct{ Secret string }
	h.call(http.MethodGet, "/v1/endpoints/"+epID+"/secret", nil, http.StatusOK, &sec)
	require.Equal(t, secret, sec.Secret)
	again, err := app.RotateKeys(ctx, h.proc.Store, to, to)
	require.NoError(t, err, "the new key alone opens every sealed row")
	require.Equal(t, app.Rotated{}, again, "a second rotation finds nothing to do")
}

// postTo posts one event to a server and returns the status and event id.
func postTo(t *testing.T, base, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/events", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: 10 * time.Second}
	res, err := client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var ev struct{ ID string }
	_ = json.NewDecoder(res.Body).Decode(&ev)
	return res.StatusCode, ev.ID
}

func mustKey(t *testing.T, s string) []byte {
	t.Helper()
	k, err := secretbox.ParseKey(s)
	require.NoError(t, err)
	return k
}

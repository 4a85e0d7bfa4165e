package app_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// TestLargeSealedPayloads posts payloads of 2 MiB (stored in over 1 MiB,
// so claims and fan-out jobs leave them out and read them apart) with
// encryption on, to an endpoint taking every event and one whose filter
// must be matched in Go against the sealed payload: one inline, two
// through a fan-out job (an Idempotency-Key). Each arrives intact and
// signed where its routing says, and nowhere else.
func TestLargeSealedPayloads(t *testing.T) {
	// A commit of megabytes under -race on a loaded machine can outlast
	// the default 5 s wait on the database.
	h := start(t, map[string]string{"SLUICE_PAYLOAD_ENCRYPTION": "on", "SLUICE_MAX_PAYLOAD": "4MiB", "SLUICE_DB_TIMEOUT": "60s"})
	all, eu := receiver.New(t), receiver.New(t)
	h.endpoint(all, []string{"big.*"}, nil)
	euID, _ := h.endpoint(eu, nil, nil)
	h.call(http.MethodPost, "/v1/subscriptions", map[string]any{
		"endpoint_id": euID, "event_types": []string{"big.*"}, "filter": map[string]any{"region": "eu"},
	}, http.StatusCreated, nil)

	blob := func() string {
		b := make([]byte, 1<<20)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b) // 2 MiB
	}
	sent := map[string]string{} // region/how: blob
	post := func(region, how string, headers ...string) {
		b := blob()
		sent[region+"/"+how] = b
		h.call(http.MethodPost, "/v1/events", map[string]any{"type": "big.one",
			"payload": map[string]any{"region": region, "how": how, "blob": b}}, http.StatusAccepted, nil, headers...)
	}
	post("eu", "inline")
	post("eu", "job", "Idempotency-Key", "k-eu")
	post("us", "job", "Idempotency-Key", "k-us")

	got := func(r *receiver.Receiver, n int) []string {
		t.Helper()
		require.True(t, r.Await(2*time.Minute, func(reqs []receiver.Request) bool { return len(reqs) >= n }), "%d deliveries", n)
		var out []string
		for _, req := range r.Requests() {
			require.True(t, req.Verified, "signed over the whole body")
			var body struct {
				Data struct{ Region, How, Blob string }
			}
			require.NoError(t, json.Unmarshal(req.Body, &body))
			key := body.Data.Region + "/" + body.Data.How
			require.Equal(t, sent[key], body.Data.Blob, "%s arrives intact", key)
			out = append(out, key)
		}
		sort.Strings(out)
		return out
	}
	require.Equal(t, []string{"eu/inline", "eu/job", "us/job"}, got(all, 3))
	require.Equal(t, []string{"eu/inline", "eu/job"}, got(eu, 2), "the filter matched in Go against the sealed payload")
	h.settle()
	require.Len(t, all.Requests(), 3, "each once")
	require.Len(t, eu.Requests(), 2, "each once, and us filtered out")
}

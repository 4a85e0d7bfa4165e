package app_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/brokertest"
)

// brokerEndpoint creates an endpoint delivering to destination,
// subscribed to patterns, and returns its id and secret.
func (h *harness) brokerEndpoint(destination map[string]any, patterns ...string) (id, secret string) {
	h.t.Helper()
	var ep struct{ ID, Secret string }
	h.call(http.MethodPost, "/v1/endpoints", map[string]any{"destination": destination}, http.StatusCreated, &ep)
	h.call(http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": ep.ID, "event_types": patterns}, http.StatusCreated, nil)
	return ep.ID, ep.Secret
}

// An endpoint with a Redis destination: its deliveries are XADDed,
// confirmed, and verify as Standard Webhooks from the entry's fields; the
// URL's password reaches the broker but never a read; a broker's error
// is the attempt's, without a status code; an out-of-memory Redis
// throttles the endpoint, spending no attempt, until it has room again.
func TestRedisDestinationDelivers(t *testing.T) {
	b := brokertest.Redis(t, "--requirepass", "pw")
	h := start(t, map[string]string{"SLUICE_RETRY_SCHEDULE": "1h"})
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(b.Port), Password: "pw", Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	withPassword := strings.Replace(b.URL, "redis://", "redis://:pw@", 1)

	id, secret := h.brokerEndpoint(map[string]any{"type": "redis", "url": withPassword, "stream": "hooks"}, "order.*")
	var shown struct {
		URL         *string `json:"url"`
		Destination struct {
			URL         string `json:"url"`
			PasswordSet bool   `json:"password_set"`
		} `json:"destination"`
	}
	h.call(http.MethodGet, "/v1/endpoints/"+id, nil, http.StatusOK, &shown)
	require.Equal(t, b.URL, shown.Destination.URL, "the password is write-only")
	require.True(t, shown.Destination.PasswordSet)
	require.Nil(t, shown.URL)

	for i := range 3 {
		h.post("order.created", map[string]int{"n": i})
	}
	eventually(t, 20*time.Second, func() bool { return len(h.deliveries("status=delivered&endpoint_id="+id)) == 3 }, "delivered: %v", lazy(func() any { return h.deliveries("endpoint_id=" + id) }))
	var d delivery
	h.call(http.MethodGet, "/v1/deliveries/"+h.deliveries("endpoint_id=" + id)[0].ID, nil, http.StatusOK, &d)
	require.Nil(t, d.Attempts[0].StatusCode, "a broker answers no status code")
	entries, err := rdb.XRange(ctx, "hooks", "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, entries, 3)
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	for _, e := range entries {
		header := http.Header{}
		for _, name := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
			header.Set(name, e.Values[name].(string))
		}
		require.NoError(t, wh.Verify([]byte(e.Values["body"].(string)), header), "a consumer verifies the entry")
	}

	// A stream that is not one: the broker's error, recorded.
	require.NoError(t, rdb.Set(ctx, "taken", "x", 0).Err())
	bad, _ := h.brokerEndpoint(map[string]any{"type": "redis", "url": withPassword, "stream": "taken"}, "invoice.*")
	h.post("invoice.paid", map[string]int{"n": 1})
	eventually(t, 20*time.Second, func() bool { return len(h.deliveries("status=failed&endpoint_id="+bad)) == 1 }, "failed")
	h.call(http.MethodGet, "/v1/deliveries/"+h.deliveries("endpoint_id=" + bad)[0].ID, nil, http.StatusOK, &d)
	require.Nil(t, d.Attempts[0].StatusCode)
	require.Contains(t, *d.Attempts[0].Error, "WRONGTYPE")

	// Out of memory: throttled, no attempt spent, then delivered.
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err())
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "1").Err())
	full, _ := h.brokerEndpoint(map[string]any{"type": "redis", "url": withPassword, "stream": "later"}, "refund.*")
	h.post("refund.issued", map[string]int{"n": 1})
	var status struct{ Status string }
	eventually(t, 20*time.Second, func() bool {
		h.call(http.MethodGet, "/v1/endpoints/"+full, nil, http.StatusOK, &status)
		return status.Status == "throttled"
	}, "throttled")
	ds := h.deliveries("endpoint_id=" + full)
	require.Len(t, ds, 1)
	require.Contains(t, []string{"pending"}, ds[0].Status, "no attempt spent: not failed")
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "0").Err())
	eventually(t, 20*time.Second, func() bool { return len(h.deliveries("status=delivered&endpoint_id="+full)) == 1 }, "delivered once Redis has room")
}

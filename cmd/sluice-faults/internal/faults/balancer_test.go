package faults

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBalancerKeepsAnUpstreamOutOfRotation: requests alternate between
// the upstreams; one taken out gets none until it is put back.
func TestBalancerKeepsAnUpstreamOutOfRotation(t *testing.T) {
	t.Parallel()
	var bases []string
	for i := range 2 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, i) }))
		t.Cleanup(srv.Close)
		bases = append(bases, srv.URL)
	}
	b, err := StartBalancer(bases)
	require.NoError(t, err)
	t.Cleanup(b.Close)
	served := func(n int) map[string]int {
		got := map[string]int{}
		for range n {
			resp, err := http.Get(b.URL())
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			got[string(body)]++
		}
		return got
	}
	require.Equal(t, map[string]int{"0": 5, "1": 5}, served(10))
	b.SetOut(0, true)
	require.Equal(t, map[string]int{"1": 10}, served(10), "none to the upstream out of rotation")
	b.SetOut(0, false)
	require.Equal(t, map[string]int{"0": 5, "1": 5}, served(10))
}

// TestReconcileTimeWithoutDeliveries: the longest gap between two
// receipts at healthy endpoints, whatever the endpoint, outages counted;
// receipts at other endpoints do not fill it.
func TestReconcileTimeWithoutDeliveries(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	receipts := []Receipt{
		{At: at(0), Endpoint: "ok0", ID: "a"}, {At: at(1), Endpoint: "ok1", ID: "a"},
		{At: at(2), Endpoint: "bad", ID: "b"}, // not healthy: the gap goes on
		{At: at(4.5), Endpoint: "ok0", ID: "b"}, {At: at(5), Endpoint: "ok1", ID: "b"},
	}
	faults := []Fault{{Kind: "outage", At: at(1), End: at(4), Outage: true}}
	f := Reconcile(nil, receipts, []string{"ok0", "ok1"}, faults, at(6), at(6))
	require.Equal(t, 3500*time.Millisecond, f.NoDelivery)
	require.Equal(t, at(1), f.NoDeliveryAt)
}

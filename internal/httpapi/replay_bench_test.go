package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/jobs/jobstest"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
	"github.com/sluice-dev/sluice/internal/testkit/dispatchtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// BenchmarkBulkReplayRequest is the time of one POST
// /v1/endpoints/{id}/replay whose filter matches n dead deliveries, from
// request to answer (what the client waits for; work left to a background
// job is not in it). Between iterations, untimed, the replays and whatever
// the call left queued are removed, so each call matches all n again.
// bench/replay.md has its numbers, before and after the background job.
func BenchmarkBulkReplayRequest(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchBulkReplay(b, n) })
	}
}

func benchBulkReplay(b *testing.B, n int) {
	ctx := context.Background()
	f := storetest.New(b)
	a := httpapi.New(controltest.New(f.Store, controltest.Options{AllowPrivateTargets: true, Nudger: dispatchtest.Nudger(f.Store, f.Jobs)}), httpapi.Config{APIRate: testRate})
	srv := httptest.NewServer(a.Handler())
	b.Cleanup(srv.Close)
	ep, err := f.Store.CreateEndpoint(ctx, f.TenantA.ID, sluice.EndpointSettings{URL: "http://127.0.0.1:9/hook", MaxInFlight: 10}, storetest.Secret)
	if err != nil {
		b.Fatal(err)
	}
	storetest.DeadBacklog(b, f.Store, f.TenantA.ID, ep.ID, n)
	url := srv.URL + "/v1/endpoints/" + ep.ID.String() + "/replay"
	for b.Loop() {
		b.StopTimer()
		for _, reset := range benchReplayReset {
			if _, err := f.Store.Pool().Exec(ctx, reset); err != nil {
				b.Fatal(err)
			}
		}
		jobstest.DeleteAll(b, f.Store.Pool())
		b.StartTimer()
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"status":"dead"}`))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+f.KeyA)
		req.Header.Set("Content-Type", "application/json")
		res, err := srv.Client().Do(req)
		if err != nil {
			b.Fatal(err)
		}
		var out struct{ Queued int }
		err = json.NewDecoder(res.Body).Decode(&out)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusAccepted || out.Queued != n {
			b.Fatalf("status %d, queued %d of %d (%v)", res.StatusCode, out.Queued, n, err)
		}
	}
}

// benchReplayReset undoes a bulk replay: its replays and its jobs.
var benchReplayReset = []string{
	"DELETE FROM deliveries WHERE replayed_from IS NOT NULL",
	"DELETE FROM replay_requests",
	"SELECT 1",
}

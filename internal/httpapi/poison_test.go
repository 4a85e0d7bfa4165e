package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// Bounds of TestPoisonBesideVictim: it runs this long, or until each side
// has sent this many requests.
const (
	poisonDuration    = 10 * time.Second
	poisonMaxRequests = 60000
	poisonWorkers     = 6
	// poisonPerVictim is how many poison requests each victim request
	// answered lets go (see TestPoisonBesideVictim).
	poisonPerVictim = 4
)

// poisons are events that must be refused alone, whatever they are
// committed beside: text Postgres cannot store.
var poisons = []struct {
	body, idempotencyKey string
}{
	{body: "{\"type\":\"order.created\",\"payload\":{\"s\":\"a\xff\xfeb\"}}"},
	{body: `{"type":"order.created","payload":{"s":"x"},"coalesce_key":"\u0000"}`},
	{body: `{"type":"order.created","payload":{"s":"x"}}`, idempotencyKey: "k\x00"},
	{body: `{"type":"order.created","payload":{"s":"\ud800"}}`},
}

// TestPoisonBesideVictim posts, for 10 s, valid single events of tenant B
// (the victim, over HTTP, grouped into shared commits by the API) beside
// poison events of tenant A. Every one of the victim's requests must
// succeed and its event be stored; the poisoner gets only 4xx.
func TestPoisonBesideVictim(t *testing.T) {
	b := setup(t)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: poisonWorkers}, Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), poisonDuration)
	defer cancel()

	var victim, poisoner poisonTally
	var poisonerDone atomic.Int64 // nanoseconds after start the last poisoner stopped
	// Each victim request answered lets poisonPerVictim poison requests
	// go: unpaced, the poisoners would reach poisonMaxRequests in seconds
	// and starve the victim meanwhile; paced so, the poison lasts the whole
	// run, beside the victim's requests.
	paced := make(chan struct{}, poisonWorkers*poisonPerVictim)
	var mu sync.Mutex
	var accepted []uuid.UUID
	var wg sync.WaitGroup
	for w := range poisonWorkers {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil && victim.sent.Add(1) <= poisonMaxRequests; i++ {
				id, err := postVictimEvent(client, b.srv.URL, b.keyB, fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))
				for range poisonPerVictim {
					select {
					case paced <- struct{}{}:
					default:
					}
				}
				if err != nil {
					victim.fail(err)
					continue
				}
				mu.Lock()
				accepted = append(accepted, id)
				mu.Unlock()
			}
		})
		wg.Go(func() {
			for i := 0; ctx.Err() == nil && poisoner.sent.Add(1) <= poisonMaxRequests; i++ {
				select {
				case <-paced:
					poisoner.count(postPoison(b, i))
				case <-ctx.Done():
				}
			}
			poisonerDone.Store(int64(time.Since(start)))
		})
	}
	wg.Wait()

	t.Logf("in %s (poisoners until %s): victim: %d requests, %d failed; poisoner: %d requests, %d 4xx, %d other",
		time.Since(start).Round(time.Millisecond), time.Duration(poisonerDone.Load()).Round(time.Millisecond), len(accepted)+int(victim.failed.Load()), victim.failed.Load(), poisoner.total(), poisoner.clientErrors.Load(), poisoner.other.Load())
	require.Zero(t, victim.failed.Load(), "victim failures, e.g. %v", victim.firstErr())
	require.NotEmpty(t, accepted)
	require.Zero(t, poisoner.other.Load(), "poisoner answers that were not 4xx")
	require.Positive(t, poisoner.clientErrors.Load())
	requireStored(t, b, b.tenantB, accepted)
}

// poisonTally counts one side's requests and how they went.
type poisonTally struct {
	sent         atomic.Int64
	failed       atomic.Int64
	clientErrors atomic.Int64
	other        atomic.Int64
	mu           sync.Mutex
	first        error
}

func (p *poisonTally) fail(err error) {
	p.failed.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.first == nil {
		p.first = err
	}
}

func (p *poisonTally) firstErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.first
}

func (p *poisonTally) count(status int) {
	if status >= 400 && status < 500 {
		p.clientErrors.Add(1)
		return
	}
	p.other.Add(1)
	p.fail(fmt.Errorf("status %d", status))
}

func (p *poisonTally) total() int64 { return p.clientErrors.Load() + p.other.Load() }

// postVictimEvent posts one valid event and returns its id.
func postVictimEvent(client *http.Client, base, key, payload string) (uuid.UUID, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/events", strings.NewReader(`{"type":"order.created","payload":`+payload+`}`))
	if err != nil {
		return uuid.Nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return uuid.Nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return uuid.Nil, err
	}
	if res.StatusCode != http.StatusAccepted {
		return uuid.Nil, fmt.Errorf("status %d: %s", res.StatusCode, body)
	}
	var ev sluice.Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return uuid.Nil, err
	}
	return ev.ID, nil
}

// postPoison sends the i-th poison as tenant A, straight to the handler
// (no HTTP client sends a NUL in a header), and returns the status.
func postPoison(b *testBundle, i int) int {
	p := poisons[i%len(poisons)]
	req := httptest.NewRequest(http.MethodPost, "/v1/events", strings.NewReader(p.body))
	req.Header.Set("Authorization", "Bearer "+b.keyA)
	req.Header.Set("Content-Type", "application/json")
	if p.idempotencyKey != "" {
		req.Header["Idempotency-Key"] = []string{p.idempotencyKey}
	}
	rec := httptest.NewRecorder()
	b.handler.ServeHTTP(rec, req)
	return rec.Code
}

// requireStored checks that tenant has exactly the events ids.
func requireStored(t *testing.T, b *testBundle, tenant sluice.Tenant, ids []uuid.UUID) {
	want := make(map[uuid.UUID]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	got := map[uuid.UUID]bool{}
	p := sluice.PageParams{Limit: sluice.MaxPageLimit}
	for {
		page, err := b.store.ListEvents(context.Background(), tenant.ID, nil, nil, p)
		require.NoError(t, err)
		for _, ev := range page.Items {
			got[ev.ID] = true
		}
		if page.Next == nil {
			break
		}
		p.After = page.Next
	}
	require.Equal(t, len(want), len(got), "stored events")
	for id := range want {
		require.True(t, got[id], "event %s answered 202 but is not stored", id)
	}
}

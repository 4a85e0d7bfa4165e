package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/jobs/jobstest"
)

// tokenServer is an OAuth2 token endpoint (client credentials) that
// counts its requests, and a receiver that takes only the bearer tokens
// it issued, while they are valid.
type tokenServer struct {
	t        *testing.T
	lifetime time.Duration
	srv, rcv *httptest.Server

	mu       sync.Mutex
	asked    []time.Time          // when each token request arrived
	issued   map[string]time.Time // token: when it expires
	answer   func(n int) (status int, body string, hold bool)
	received map[string]int // webhook-id: 2xx answered
	refused  int            // 401s
	deaf     bool           // refuse every token
	byToken  []string       // the Authorization of each delivery request
	arrived  chan int       // the number of each token request, as it arrives
	release  chan struct{}  // closed when the test ends: held requests end
}

func newTokenServer(t *testing.T, lifetime time.Duration) *tokenServer {
	ts := &tokenServer{t: t, lifetime: lifetime, issued: map[string]time.Time{}, received: map[string]int{},
		arrived: make(chan int, 100), release: make(chan struct{})}
	ts.srv = httptest.NewServer(http.HandlerFunc(ts.token))
	ts.rcv = httptest.NewServer(http.HandlerFunc(ts.receive))
	t.Cleanup(func() { close(ts.release); ts.srv.Close(); ts.rcv.Close() })
	return ts
}

func (ts *tokenServer) token(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	_ = r.ParseForm()
	ts.mu.Lock()
	ts.asked = append(ts.asked, time.Now())
	n := len(ts.asked)
	answer := ts.answer
	ts.mu.Unlock()
	ts.arrived <- n
	if !ok || id != "sluice" || secret != "s3cret" || r.PostForm.Get("grant_type") != "client_credentials" || r.PostForm.Get("scope") != "hooks" {
		http.Error(w, `{"error": "invalid_client"}`, http.StatusUnauthorized)
		return
	}
	if answer != nil {
		status, body, hold := answer(n)
		if hold {
			<-ts.release
			return
		}
		if status != 0 {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
			return
		}
	}
	tok := "tok-" + strconv.Itoa(n)
	ts.mu.Lock()
	ts.issued[tok] = time.Now().Add(ts.lifetime)
	ts.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": ts.lifetime.Seconds()})
}

// receive takes a delivery whose bearer token was issued and has not
// expired (with a second's grace, for an attempt sent just before).
func (ts *tokenServer) receive(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.byToken = append(ts.byToken, auth)
	expires, ok := ts.issued[auth[min(len(auth), len("Bearer ")):]]
	if !ok || ts.deaf || time.Now().After(expires.Add(time.Second)) || auth[:min(len(auth), 7)] != "Bearer " {
		ts.refused++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	ts.received[r.Header.Get("Webhook-Id")]++
}

func (ts *tokenServer) counts() (asked, received, refused int) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.asked), len(ts.received), ts.refused
}

// authEndpoint creates an endpoint for ts's receiver with the auth option
// on ts's token endpoint, subscribed to pattern.
func (h *harness) authEndpoint(ts *tokenServer, pattern string, extra map[string]any) string {
	h.t.Helper()
	body := map[string]any{"url": ts.rcv.URL + "/hook", "auth": map[string]string{
		"type": "oauth2_client_credentials", "token_url": ts.srv.URL + "/token",
		"client_id": "sluice", "client_secret": "s3cret", "scope": "hooks",
	}}
	for k, v := range extra {
		body[k] = v
	}
	var ep struct {
		ID   string
		Auth map[string]any
	}
	h.call(http.MethodPost, "/v1/endpoints", body, http.StatusCreated, &ep)
	require.Equal(h.t, true, ep.Auth["client_secret_set"])
	require.NotContains(h.t, ep.Auth, "client_secret")
	h.call(http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": ep.ID, "event_types": []string{pattern}}, http.StatusCreated, nil)
	return ep.ID
}

// Two worker processes deliver 2,000 events to one endpoint with the
// auth option: they share each token through Postgres, so the token
// endpoint is asked once per token lifetime (a tenth of it before it
// ends), not once per process or per attempt.
func TestOAuthTokenSharedByWorkerProcesses(t *testing.T) {
	const lifetime = time.Second
	h := startWith(t, nil, app.Roles{API: true})
	ts := newTokenServer(t, lifetime)
	h.authEndpoint(ts, "oauth.*", map[string]any{"max_in_flight": 5})
	h.startChild()
	h.startChild()

	start := time.Now()
	const events = 2000
	for range events / 500 {
		h.postBatch("oauth.sent", 500)
	}
	eventually(t, 90*time.Second, func() bool { _, got, _ := ts.counts(); return got == events }, "all %d delivered", events)
	took := time.Since(start)

	ts.mu.Lock()
	asked := append([]time.Time(nil), ts.asked...)
	refused := ts.refused
	ts.mu.Unlock()
	t.Logf("%d events in %s: %d token requests (a token lasts %s), %d deliveries refused", events, took.Round(time.Millisecond), len(asked), lifetime, refused)
	require.Zero(t, refused, "every attempt carried a valid token")
	for i := 1; i < len(asked); i++ {
		gap := asked[i].Sub(asked[i-1])
		require.GreaterOrEqual(t, gap, lifetime*7/10, "token request %d came %s after the one before: one per lifetime", i+1, gap)
	}
	require.LessOrEqual(t, len(asked), int(took/(lifetime*9/10))+1)
}

// A receiver's 401 gets one fresh token and one resend inside the same
// attempt; a second 401 is the attempt's failure.
func TestOAuthRefusedTokenRefreshedOnce(t *testing.T) {
	h := start(t, map[string]string{"SLUICE_RETRY_SCHEDULE": "1h"})
	ts := newTokenServer(t, time.Hour)
	id := h.authEndpoint(ts, "oauth.*", nil)

	// The receiver has forgotten the first token: the second is taken.
	ts.mu.Lock()
	ts.answer = func(n int) (int, string, bool) {
		if n == 1 {
			return 200, `{"access_token": "forgotten", "token_type": "bearer", "expires_in": 3600}`, false
		}
		return 0, "", false
	}
	ts.mu.Unlock()
	h.post("oauth.once", map[string]int{"n": 1})
	eventually(t, 20*time.Second, func() bool { return len(h.deliveries("status=delivered&endpoint_id="+id)) == 1 }, "delivered")
	var d delivery
	h.call(http.MethodGet, "/v1/deliveries/"+h.deliveries("endpoint_id=" + id)[0].ID, nil, http.StatusOK, &d)
	require.Equal(t, 1, d.AttemptCount, "one attempt, its resend inside it")
	require.Len(t, d.Attempts, 1)
	require.Equal(t, 200, *d.Attempts[0].StatusCode)
	ts.mu.Lock()
	require.Equal(t, []string{"Bearer forgotten", "Bearer tok-2"}, ts.byToken)
	ts.mu.Unlock()

	// Every token refused: one refresh, then the 401 is the failure.
	ts.mu.Lock()
	ts.deaf, ts.byToken = true, nil
	ts.mu.Unlock()
	h.post("oauth.twice", map[string]int{"n": 2})
	eventually(t, 20*time.Second, func() bool { return len(h.deliveries("status=failed&endpoint_id="+id)) == 1 }, "failed")
	h.call(http.MethodGet, "/v1/deliveries/"+h.deliveries("status=failed&endpoint_id=" + id)[0].ID, nil, http.StatusOK, &d)
	require.Equal(t, 1, d.AttemptCount)
	require.Equal(t, 401, *d.Attempts[0].StatusCode)
	ts.mu.Lock()
	require.Equal(t, []string{"Bearer tok-2", "Bearer tok-3"}, ts.byToken, "the stored token, then one fresh one")
	ts.mu.Unlock()
	asked, _, _ := ts.counts()
	require.Equal(t, 3, asked)
}

// A failing token request is the attempt's failure, naming the token
// endpoint and its answer, whose first KiB is kept as the response body;
// the receiver is not sent anything.
func TestOAuthTokenEndpointFailure(t *testing.T) {
	h := start(t, map[string]string{"SLUICE_RETRY_SCHEDULE": "1h"})
	ts := newTokenServer(t, time.Hour)
	ts.answer = func(int) (int, string, bool) { return 503, `{"error": "temporarily_unavailable"}`, false }
	id := h.authEndpoint(ts, "oauth.*", nil)

	h.post("oauth.fails", map[string]int{"n": 1})
	eventually(t, 20*time.Second, func() bool { return len(h.deliveries("status=failed&endpoint_id="+id)) == 1 }, "failed")
	var d delivery
	h.call(http.MethodGet, "/v1/deliveries/"+h.deliveries("endpoint_id=" + id)[0].ID, nil, http.StatusOK, &d)
	require.Nil(t, d.Attempts[0].StatusCode)
	require.Equal(t, fmt.Sprintf("token endpoint %s/token: status 503 (temporarily_unavailable)", ts.srv.URL), *d.Attempts[0].Error)
	require.JSONEq(t, `{"error": "temporarily_unavailable"}`, *d.Attempts[0].ResponseBody)
	asked, received, refused := ts.counts()
	require.Equal(t, 1, asked)
	require.Zero(t, received+refused, "nothing sent without a token")
}

// A worker process killed while it fetches a token leaves its lease to
// expire, and the process that takes over the endpoint's dispatch run,
// waiting on that lease, takes it over the moment it ends: the endpoint
// asks again within one attempt's timeout (SLUICE_DELIVERY_TIMEOUT) of the
// killed worker's request, and no other token request is made while the
// lease (three quarters of the timeout) holds.
//
// The timeout is 8 s so that the order is production's (the default
// 7.5 s lease outlasts the sweeper's replacement of a dead run: its 3 s
// grace and a sweep, here every 100 ms): the replacement run asks for the
// token while the lease holds, and the test checks that it did. A
// shorter timeout would measure the sweeper, not the lease.
func TestOAuthRefresherKilled(t *testing.T) {
	const timeout = 8 * time.Second
	// From the lease's end, the waiting process's timer fires, it takes
	// the lease (one UPDATE on loopback Postgres), opens the client
	// secret and connects to the loopback token server: the same path the
	// killed worker's own request took from its lease, milliseconds on an
	// idle box. The margin is for a 2-core box shared with other test
	// processes, under -race, and the quarter of the timeout the lease
	// leaves covers it; a lease as long as the timeout, or a process that
	// only fetched on its next attempt, would miss the bound.
	const takeover = 500 * time.Millisecond
	h := startWith(t, map[string]string{"SLUICE_DELIVERY_TIMEOUT": "8s", "SLUICE_SWEEP_INTERVAL": "100ms"}, app.Roles{API: true})
	ts := newTokenServer(t, time.Hour)
	ts.answer = func(n int) (int, string, bool) { return 0, "", n == 1 } // the first request never answered
	id := h.authEndpoint(ts, "oauth.*", nil)
	first := h.startChild()
	h.post("oauth.sent", map[string]int{"n": 1})
	require.Equal(t, 1, ts.nextRequest(30*time.Second))
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_, _ = first.Process.Wait()
	pool := h.proc.Store.Pool()
	var leaseEnd time.Time
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT refreshing_until FROM endpoint_auth WHERE endpoint_id = $1`, id).Scan(&leaseEnd))

	h.startChild()
	require.Equal(t, 2, ts.nextRequest(timeout+30*time.Second))
	eventually(t, 20*time.Second, func() bool { _, got, _ := ts.counts(); return got == 1 }, "delivered")
	ts.mu.Lock()
	leased, next := ts.asked[0], ts.asked[1]
	ts.mu.Unlock()
	var waiting time.Time // when the run that replaced the dead one started
	for _, j := range jobstest.Dispatch(t, pool, id) {
		if j.State != "cancelled" && j.AttemptedAt != nil && (waiting.IsZero() || j.AttemptedAt.Before(waiting)) {
			waiting = *j.AttemptedAt
		}
	}
	require.False(t, waiting.IsZero(), "a dispatch run of the endpoint started")
	t.Logf("lease ends %s after the killed worker's request; replacement run waiting %s before its end; next request %s after its end (%s after the killed worker's)",
		leaseEnd.Sub(leased).Round(time.Millisecond), leaseEnd.Sub(waiting).Round(time.Millisecond),
		next.Sub(leaseEnd).Round(time.Millisecond), next.Sub(leased).Round(time.Millisecond))
	require.True(t, waiting.Before(leaseEnd), "the replacement run started while the lease held (else this measures the sweeper)")
	require.LessOrEqual(t, leaseEnd.Sub(leased), timeout*3/4, "the lease is three quarters of an attempt's timeout, from before the killed worker asked")
	require.False(t, next.Before(leaseEnd), "nobody fetches while the lease holds")
	require.LessOrEqual(t, next.Sub(leaseEnd), takeover, "the waiting process takes the lease over as it ends")
	require.LessOrEqual(t, next.Sub(leased), timeout, "the endpoint is without a token for at most one attempt's timeout")
	asked, _, _ := ts.counts()
	require.Equal(t, 2, asked)
}

// nextRequest is the number of the next token request to arrive, within
// limit.
func (ts *tokenServer) nextRequest(limit time.Duration) int {
	ts.t.Helper()
	select {
	case n := <-ts.arrived:
		return n
	case <-time.After(limit):
		ts.t.Fatalf("no token request within %s", limit)
		return 0
	}
}

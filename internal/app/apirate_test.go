package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// stampedRoles makes a child process (startChildWith) an API process whose
// every answer carries the moment the process answered it, on its clock
// (answeredHeader): when it had accepted the request or refused it.
const stampedRoles = "api-stamped"

// answeredHeader carries a stamped API process's answer time, in Unix
// nanoseconds.
const answeredHeader = "X-Test-Answered"

// runStampedAPI serves the API role like `sluice serve --api`, stamping
// each answer, until SIGTERM.
func runStampedAPI() {
	cfg, err := config.FromEnv(true)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	p, err := app.New(ctx, cfg, app.Roles{API: true}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		err = p.Start(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer p.Close()
	srv := &http.Server{Addr: cfg.Addr, Handler: stamped(p.Handler), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func stamped(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&stampWriter{ResponseWriter: w}, r)
	})
}

// stampWriter sets answeredHeader as the answer's status is written.
type stampWriter struct {
	http.ResponseWriter
	done bool
}

func (w *stampWriter) WriteHeader(code int) {
	if !w.done {
		w.done = true
		w.Header().Set(answeredHeader, strconv.FormatInt(time.Now().UnixNano(), 10))
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *stampWriter) Write(b []byte) (int, error) {
	if !w.done {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// answer is one request's outcome, as the API process saw it.
type answer struct {
	status int
	at     time.Time
	header http.Header
}

// TestAPIRateLimitHoldsAcrossAPIProcesses: three API processes (separate
// processes of this test binary serving like `sluice serve --api`) on one
// database, one tenant at its own rate of 50/s (bursts of 100), 16 clients
// sending requests back to back for 10 s (longer if the box is too busy to
// use the first burst up soon), spread over the processes. The
// requests the processes accepted, by the time each process answered them,
// number at most burst + rate (150) in every window of one second, and
// once the first burst is used up the tenant gets at least 95% of its
// rate. With the buckets in each process's memory the first second alone
// would accept 300 or more.
func TestAPIRateLimitHoldsAcrossAPIProcesses(t *testing.T) {
	h := startTimed(t, nil, app.Roles{API: true})
	rate := "50/s"
	require.NoError(t, h.proc.Store.SetTenantAPIRate(t.Context(), h.tenant.ID, &rate))
	const perSecond, burst = 50, 100

	addrs := make([]string, 3)
	for i := range addrs {
		addrs[i] = freeAddr(t)
		h.startChildWith(stampedRoles, map[string]string{"SLUICE_ADDR": addrs[i]})
	}
	for _, addr := range addrs {
		eventually(t, 30*time.Second, func() bool { return readyz(addr) == http.StatusOK }, "API process %s ready", addr)
		// One request each first, as a process that has served before:
		// its first would wait for connections to be made.
		a, err := get(http.DefaultClient, "http://"+addr+"/v1/event-types", h.key)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, a.status)
	}

	// The clients go on for 10 s, and on a box so busy that they took
	// long to use the first burst up, until the rate has been held for
	// 5 s after it (steadyFrom, below), up to 40 s.
	const clients, hammer, held = 16, 10 * time.Second, 5 * time.Second
	var (
		mu        sync.Mutex
		answers   []answer
		failed    error
		refusedAt time.Time // the first refusal's stamp
	)
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 4*hammer)
	defer cancel()
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer c.CloseIdleConnections()
			url := "http://" + addrs[i%len(addrs)] + "/v1/event-types"
			for ctx.Err() == nil {
				a, err := get(c, url, h.key)
				mu.Lock()
				if err != nil && failed == nil && ctx.Err() == nil {
					failed = err
				}
				if err == nil {
					answers = append(answers, a)
					if a.status == http.StatusTooManyRequests && (refusedAt.IsZero() || a.at.Before(refusedAt)) {
						refusedAt = a.at
					}
				}
				if time.Since(start) >= hammer && !refusedAt.IsZero() &&
					time.Since(refusedAt.Add(apirate.DefaultLeaseTTL)) >= held {
					cancel()
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, failed)

	var accepted []time.Time
	refused := 0
	var firstRefused time.Time
	for _, a := range answers {
		switch a.status {
		case http.StatusOK:
			accepted = append(accepted, a.at)
			require.Equal(t, strconv.Itoa(burst), a.header.Get("RateLimit-Limit"))
			remaining, err := strconv.Atoi(a.header.Get("RateLimit-Remaining"))
			require.NoError(t, err)
			require.LessOrEqual(t, remaining, burst)
		case http.StatusTooManyRequests:
			refused++
			if firstRefused.IsZero() || a.at.Before(firstRefused) {
				firstRefused = a.at
			}
			after, err := strconv.Atoi(a.header.Get("Retry-After"))
			require.NoError(t, err)
			require.GreaterOrEqual(t, after, 1)
			require.Equal(t, "0", a.header.Get("RateLimit-Remaining"))
		default:
			t.Fatalf("answer %d", a.status)
		}
	}
	sort.Slice(accepted, func(i, j int) bool { return accepted[i].Before(accepted[j]) })
	require.NotEmpty(t, accepted)
	first, last := accepted[0], accepted[len(accepted)-1]
	most := busiestClosedSecond(accepted)
	overall := float64(len(accepted)-burst) / last.Sub(first).Seconds()

	// The rate after the first burst: from a TTL after the first refusal.
	// A process refuses once the shared bucket has answered that it holds
	// less than a lease's worth; after that it only gains the rate, and
	// the leases made before have expired a TTL later, so no more than a
	// lease's worth of the first burst is left to count. On a busy box
	// the clients may take seconds to use the burst up, and a full bucket
	// gains nothing meanwhile: that is the clients' pace, not the
	// limiter's, so it is left out.
	require.False(t, firstRefused.IsZero(), "the clients asked for more than the rate")
	steadyFrom := firstRefused.Add(apirate.DefaultLeaseTTL)
	require.GreaterOrEqual(t, last.Sub(steadyFrom), held-time.Second, "the rate was held long enough to tell")
	steady, asked := 0, 0
	for _, a := range answers {
		if a.at.After(steadyFrom) {
			asked++
			if a.status == http.StatusOK {
				steady++
			}
		}
	}
	achieved := float64(steady) / last.Sub(steadyFrom).Seconds()
	offered := float64(asked) / last.Sub(steadyFrom).Seconds()

	var calls int64
	require.NoError(t, h.proc.Pool.QueryRow(t.Context(),
		`SELECT coalesce(sum(calls), 0)::bigint FROM api_buckets WHERE tenant_id = $1`, h.tenant.ID).Scan(&calls))
	t.Logf("%d accepted, %d refused; busiest one-second window %d (bound %d); %.1f/s from %s in (%.0f%% of %d/s, %.0f/s asked), "+
		"%.1f/s overall less the burst; %d statements on the shared bucket, %.1f a second per process; "+
		"the statement runs in %s on the server",
		len(accepted), refused, most, burst+perSecond, achieved, steadyFrom.Sub(first).Round(time.Millisecond),
		100*achieved/perSecond, perSecond, offered, overall,
		calls, float64(calls)/last.Sub(first).Seconds()/float64(len(addrs)), leaseExecutionTime(t, h))
	require.LessOrEqual(t, most, burst+perSecond, "busiest one-second window of accepted requests")
	require.Greater(t, offered, 1.5*perSecond, "the clients asked for little more than the rate: the box is too busy to hold the limiter to it")
	require.GreaterOrEqual(t, achieved, 0.95*perSecond, "the rate after the first burst")
}

// get sends an authenticated GET and reads its answer.
func get(c *http.Client, url, key string) (answer, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := c.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		return answer{}, err
	}
	ns, err := strconv.ParseInt(res.Header.Get(answeredHeader), 10, 64)
	if err != nil {
		return answer{}, fmt.Errorf("answer %d without a stamp: %w", res.StatusCode, err)
	}
	return answer{status: res.StatusCode, at: time.Unix(0, ns), header: res.Header}, nil
}

// busiestClosedSecond is the most of the sorted times in any window
// [t, t + 1 s], both ends included.
func busiestClosedSecond(times []time.Time) int {
	most, j := 0, 0
	for i := range times {
		for j < len(times) && !times[j].After(times[i].Add(time.Second)) {
			j++
		}
		most = max(most, j-i)
	}
	return most
}

// leaseExecutionTime is the median time the server takes to run the
// shared bucket's statement (EXPLAIN ANALYZE's execution time, without the
// round trip) on the harness's tenant.
func leaseExecutionTime(t *testing.T, h *harness) time.Duration {
	t.Helper()
	sql := strings.NewReplacer("sqlc.arg(capacity)", "$1", "sqlc.arg(per_second)", "$2", "sqlc.arg(owed)", "$3",
		"sqlc.arg(want)", "$4", "sqlc.arg(tenant_id)", "$5").Replace(storetest.QuerySQL(t, "api_buckets.sql", "LeaseAPITokens"))
	re := regexp.MustCompile(`Execution Time: ([0-9.]+) ms`)
	var times []time.Duration
	for range 21 {
		plan := storetest.ExplainAnalyze(t, h.proc.Pool, sql, 90.0, 50.0, 0.0, int64(1), h.tenant.ID)
		m := re.FindStringSubmatch(plan)
		require.NotNil(t, m, plan)
		ms, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		times = append(times, time.Duration(ms*float64(time.Millisecond)))
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	return times[len(times)/2]
}

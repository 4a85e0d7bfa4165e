package faults

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// liveJob is a River job state in which the job will still run.
const liveStates = `('available','running','scheduled','retryable','pending')`

// DBState is what the database says at the end of a scenario.
type DBState struct {
	// Queued counts deliveries to the healthy endpoints still pending or
	// failed; Stuck those of any endpoint that are due, without a live
	// dispatch job for their endpoint (nothing will ever send them).
	Queued, Stuck int
	// Unfanned counts events of a tenant with endpoints (all subscribed to
	// *) without deliveries and without a live fan-out job.
	Unfanned int
	// Jobs counts River jobs by kind and state.
	Jobs string
	// StuckSample names a few stuck deliveries.
	StuckSample []string
}

// CheckDB reads DBState. healthyURLs are the healthy endpoints' URLs.
func CheckDB(ctx context.Context, db *pgxpool.Pool, healthyURLs []string) (DBState, error) {
	var s DBState
	err := db.QueryRow(ctx, `
		SELECT count(*) FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id
		WHERE d.status IN ('pending','failed') AND e.url = ANY($1)`, healthyURLs).Scan(&s.Queued)
	if err != nil {
		return s, fmt.Errorf("queued deliveries: %w", err)
	}
	rows, err := db.Query(ctx, `
		SELECT d.id::text || ' (' || d.status || ', due ' || to_char(d.next_attempt_at, 'HH24:MI:SS.MS') || ', endpoint ' || d.endpoint_id || ')'
		FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id
		WHERE d.status IN ('pending','failed') AND d.next_attempt_at <= now() AND NOT e.disabled
		  AND NOT EXISTS (SELECT 1 FROM river_job j
		                  WHERE j.kind = 'dispatch' AND j.state IN `+liveStates+`
		                    AND j.args->>'endpoint_id' = d.endpoint_id::text)`)
	if err != nil {
		return s, fmt.Errorf("stuck deliveries: %w", err)
	}
	stuck, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return s, fmt.Errorf("stuck deliveries: %w", err)
	}
	s.Stuck = len(stuck)
	s.StuckSample = stuck[:min(len(stuck), 5)]
	err = db.QueryRow(ctx, `
		SELECT count(*) FROM events ev
		WHERE EXISTS (SELECT 1 FROM endpoints en WHERE en.tenant_id = ev.tenant_id)
		  AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = ev.id)
		  AND NOT EXISTS (SELECT 1 FROM river_job j WHERE j.kind = 'fanout' AND j.state IN `+liveStates+`
		                    AND j.args->'event_ids' ? ev.id::text)`).Scan(&s.Unfanned)
	if err != nil {
		return s, fmt.Errorf("events without fan-out: %w", err)
	}
	s.Jobs, err = jobCounts(ctx, db)
	return s, err
}

func jobCounts(ctx context.Context, db *pgxpool.Pool) (string, error) {
	rows, err := db.Query(ctx, `SELECT kind || ':' || state, count(*) FROM river_job GROUP BY 1 ORDER BY 1`)
	if err != nil {
		return "", fmt.Errorf("river_job: %w", err)
	}
	var parts []string
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			return "", err
		}
		parts = append(parts, fmt.Sprintf("%s=%d", k, n))
	}
	return strings.Join(parts, " "), rows.Err()
}

// Sampler records, every interval, the dispatch jobs by state (with how
// far in the future the latest scheduled_at is, and the last error of
// retryable ones) and the deliveries due, to a log file, so a stall can be
// explained afterwards.
type Sampler struct {
	db   *pgxpool.Pool
	file *os.File
	stop chan struct{}
	wg   sync.WaitGroup

	mu sync.Mutex
	// maxRetryable is the most dispatch jobs seen retryable at once, and
	// maxRetryWait the longest wait until one of them was to run again.
	maxRetryable int
	maxRetryWait time.Duration
	lastError    string
}

// StartSampler samples db every interval until Stop.
func StartSampler(db *pgxpool.Pool, path string, interval time.Duration) (*Sampler, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	s := &Sampler{db: db, file: f, stop: make(chan struct{})}
	s.wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.sample()
			}
		}
	})
	return s, nil
}

func (s *Sampler) sample() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	now := time.Now()
	rows, err := s.db.Query(ctx, `
		SELECT state::text, count(*), coalesce(extract(epoch FROM max(scheduled_at) - now()), 0)::float8,
		       coalesce(max(errors[array_length(errors, 1)]->>'error') FILTER (WHERE state = 'retryable'), '')
		FROM river_job WHERE kind = 'dispatch' AND state IN `+liveStates+` GROUP BY 1`)
	if err != nil {
		fmt.Fprintf(s.file, "%s db error: %v\n", now.Format("15:04:05.000"), err)
		return
	}
	type st struct {
		state string
		n     int
		wait  float64
		err   string
	}
	var states []st
	for rows.Next() {
		var x st
		if err := rows.Scan(&x.state, &x.n, &x.wait, &x.err); err == nil {
			states = append(states, x)
		}
	}
	rows.Close()
	var due int
	_ = s.db.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE status IN ('pending','failed') AND next_attempt_at <= now()`).Scan(&due)
	sort.Slice(states, func(i, j int) bool { return states[i].state < states[j].state })
	var parts []string
	s.mu.Lock()
	for _, x := range states {
		parts = append(parts, fmt.Sprintf("%s=%d(latest scheduled %+.1fs)", x.state, x.n, x.wait))
		if x.state == "retryable" {
			s.maxRetryable = max(s.maxRetryable, x.n)
			s.maxRetryWait = max(s.maxRetryWait, time.Duration(x.wait*float64(time.Second)))
			if x.err != "" {
				s.lastError = x.err
			}
		}
	}
	s.mu.Unlock()
	fmt.Fprintf(s.file, "%s dispatch jobs: %s; deliveries due: %d\n", now.Format("15:04:05.000"), strings.Join(parts, " "), due)
}

// Stop ends sampling and returns a summary of retryable dispatch jobs.
func (s *Sampler) Stop() string {
	close(s.stop)
	s.wg.Wait()
	s.file.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.maxRetryable == 0 {
		return ""
	}
	msg := fmt.Sprintf("up to %d dispatch jobs retryable at once, the latest scheduled %.0fs ahead", s.maxRetryable, s.maxRetryWait.Seconds())
	if s.lastError != "" {
		msg += fmt.Sprintf(" (last error: %.120s)", s.lastError)
	}
	return msg
}

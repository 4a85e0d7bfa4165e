package faults

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-dev/sluice/internal/jobs"
)

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
	// One snapshot for Sluice's tables and River's.
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return s, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if s.StuckSample, s.Stuck, err = stuckDeliveries(ctx, tx); err != nil {
		return s, err
	}
	if s.Unfanned, err = unfannedEvents(ctx, tx); err != nil {
		return s, err
	}
	s.Jobs, err = jobCounts(ctx, tx)
	return s, err
}

// stuckDeliveries describes (up to 5) and counts the due deliveries of
// enabled endpoints without a live dispatch job.
func stuckDeliveries(ctx context.Context, tx pgx.Tx) ([]string, int, error) {
	rows, err := tx.Query(ctx, `
		SELECT d.endpoint_id, d.id::text || ' (' || d.status || ', due ' || to_char(d.next_attempt_at, 'HH24:MI:SS.MS') || ', endpoint ' || d.endpoint_id || ')'
		FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id
		WHERE d.status IN ('pending','failed') AND d.next_attempt_at <= now() AND NOT e.disabled`)
	if err != nil {
		return nil, 0, fmt.Errorf("due deliveries: %w", err)
	}
	type due struct {
		EndpointID uuid.UUID
		Desc       string
	}
	dues, err := pgx.CollectRows(rows, pgx.RowToStructByPos[due])
	if err != nil {
		return nil, 0, fmt.Errorf("due deliveries: %w", err)
	}
	eps := make([]uuid.UUID, len(dues))
	for i, d := range dues {
		eps[i] = d.EndpointID
	}
	live, err := jobs.LiveDispatch(ctx, tx, eps)
	if err != nil {
		return nil, 0, fmt.Errorf("stuck deliveries: %w", err)
	}
	var stuck []string
	for _, d := range dues {
		if !live[d.EndpointID] {
			stuck = append(stuck, d.Desc)
		}
	}
	return stuck[:min(len(stuck), 5)], len(stuck), nil
}

// unfannedEvents counts the events of a tenant with endpoints (all
// subscribed to *) without deliveries and without a live fan-out job.
// Operational events are left out: "*" does not match them, so they have
// no delivery unless a scenario subscribes to them, and the transitions
// scenario checks those it does.
func unfannedEvents(ctx context.Context, tx pgx.Tx) (int, error) {
	rows, err := tx.Query(ctx, `
		SELECT ev.id FROM events ev
		WHERE ev.type NOT LIKE 'sluice.%'
		  AND EXISTS (SELECT 1 FROM endpoints en WHERE en.tenant_id = ev.tenant_id)
		  AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = ev.id)`)
	if err != nil {
		return 0, fmt.Errorf("events without deliveries: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return 0, fmt.Errorf("events without deliveries: %w", err)
	}
	live, err := jobs.LiveFanout(ctx, tx, ids)
	if err != nil {
		return 0, fmt.Errorf("events without fan-out: %w", err)
	}
	return len(ids) - len(live), nil
}

func jobCounts(ctx context.Context, db jobs.DBTX) (string, error) {
	counts, err := jobs.CountByKindAndState(ctx, db)
	if err != nil {
		return "", fmt.Errorf("count River jobs: %w", err)
	}
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = fmt.Sprintf("%s:%s=%d", c.Kind, c.State, c.Jobs)
	}
	return strings.Join(parts, " "), nil
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
		return nil, fmt.Errorf("create sample file: %w", err)
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
	states, err := jobs.LiveDispatchByState(ctx, s.db)
	if err != nil {
		fmt.Fprintf(s.file, "%s db error: %v\n", now.Format("15:04:05.000"), err)
		return
	}
	var due int
	_ = s.db.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE status IN ('pending','failed') AND next_attempt_at <= now()`).Scan(&due)
	sort.Slice(states, func(i, j int) bool { return states[i].State < states[j].State })
	var parts []string
	s.mu.Lock()
	for _, x := range states {
		parts = append(parts, fmt.Sprintf("%s=%d(latest scheduled %+.1fs)", x.State, x.Jobs, x.LatestIn.Seconds()))
		if x.State == "retryable" {
			s.maxRetryable = max(s.maxRetryable, x.Jobs)
			s.maxRetryWait = max(s.maxRetryWait, x.LatestIn)
			if x.LastError != "" {
				s.lastError = x.LastError
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

// awaitDrained checks the database (CheckDB) every half second until
// nothing is queued to the endpoints at urls or within has passed, and
// returns the last state; a failed check is added to notes.
func awaitDrained(ctx context.Context, db *pgxpool.Pool, urls []string, within time.Duration, notes []string) (DBState, []string) {
	var last DBState
	drainBy := time.Now().Add(within)
	for {
		st, err := CheckDB(ctx, db, urls)
		if err != nil {
			return last, append(notes, "db check: "+err.Error())
		}
		last = st
		if st.Queued == 0 || time.Now().After(drainBy) || ctx.Err() != nil {
			return last, notes
		}
		_ = sleep(ctx, 500*time.Millisecond)
	}
}

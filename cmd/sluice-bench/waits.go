package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// waitStats counts, over periodic samples of pg_stat_activity, what
// Sluice's Postgres sessions were doing: running, waiting for a lock,
// waiting for sluice inside a transaction, and so on.
type waitStats struct {
	samples int
	counts  map[string]int // "what" → sessions seen doing it, summed over samples
}

// sampleWaits samples db's sessions every 50 ms until the returned func is
// called, which returns the tally. conn must be used by nothing else
// meanwhile.
func sampleWaits(ctx context.Context, conn *pgx.Conn) func() waitStats {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan waitStats, 1)
	go func() {
		ws := waitStats{counts: map[string]int{}}
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if err := ws.sample(ctx, conn); err != nil {
				done <- ws
				return
			}
			select {
			case <-ctx.Done():
				done <- ws
				return
			case <-t.C:
			}
		}
	}()
	return func() waitStats { cancel(); return <-done }
}

func (ws *waitStats) sample(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, `
		SELECT CASE WHEN state = 'active' AND wait_event_type IS NULL THEN 'running'
		            WHEN state = 'active' THEN 'waiting: ' || wait_event_type || '/' || wait_event
		            ELSE 'idle in transaction (waiting for sluice)' END,
		       count(*)
		FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()
		  AND state IN ('active', 'idle in transaction')
		GROUP BY 1`)
	if err != nil {
		return fmt.Errorf("sample pg_stat_activity: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var what string
		var n int
		if err := rows.Scan(&what, &n); err != nil {
			return fmt.Errorf("scan pg_stat_activity: %w", err)
		}
		ws.counts[what] += n
	}
	ws.samples++
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read pg_stat_activity: %w", err)
	}
	return nil
}

func (ws waitStats) add(o waitStats) waitStats {
	out := waitStats{samples: ws.samples + o.samples, counts: map[string]int{}}
	for k, v := range ws.counts {
		out.counts[k] += v
	}
	for k, v := range o.counts {
		out.counts[k] += v
	}
	return out
}

// String lists the mean number of sessions per activity, largest first.
func (ws waitStats) String() string {
	if ws.samples == 0 {
		return ""
	}
	keys := make([]string, 0, len(ws.counts))
	for k := range ws.counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return ws.counts[b] - ws.counts[a] })
	var parts []string
	for i, k := range keys {
		mean := float64(ws.counts[k]) / float64(ws.samples)
		if i >= 6 || mean < 0.05 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.1f", k, mean))
	}
	if len(parts) == 0 {
		return "none busy"
	}
	return strings.Join(parts, ", ")
}

package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Backlog alerts: what checking 10,000 endpoints' backlog alerts costs,
// as CPU with the alerts set minus CPU with them unset, nothing else going on.

var backlogAlertsScenario = Scenario{
	Name:  "backlog-alerts",
	Title: "Backlog alerts: the cost of checking 10,000 endpoints",
	What: "10,000 endpoints (1,000 with -quick) created through POST /v1/endpoints with backlog_alert " +
		"{\"queued\": 1000, \"oldest_seconds\": 600}, on one loopback receiver, no subscriptions. Each run measures CPU " +
		"(Sluice and the whole Postgres cluster, from /proc) over a 20 s window with the alerts unset, then over a 20 s " +
		"window with them set, reading the check's statements from pg_stat_statements when Postgres has it (one UPDATE of the columns PATCH writes switches them between windows, then a 6 s settle " +
		"so each window holds whole checks). Added CPU = set − unset. The sweep checks them every 5 s by default. " +
		"The endpoints are deleted at the end. Target from the backlog-alert issue: added ≤ 0.02 cores.",
	Run:            backlogAlerts,
	MinTimeout:     3 * time.Minute,
	NoWaitSampling: true,
}

func backlogAlerts(ctx context.Context, env *Env) (Table, error) {
	n := env.size(10000, 1000)
	window := time.Duration(env.size(20, 10)) * time.Second
	metrics := []Metric{
		{Name: "added by the checks", Unit: "cores", Target: 0.02, AtMost: true},
		{Name: "Sluice + Postgres, alerts set", Unit: "cores"},
		{Name: "Sluice + Postgres, alerts unset", Unit: "cores"},
		{Name: "Postgres, added", Unit: "cores"},
		{Name: "Sluice, added", Unit: "cores"},
		{Name: "check statement, Postgres time per check", Unit: "ms"},
		{Name: "checks, alerts set", Unit: "checks"},
	}
	pgss, pgssNote := pgssReady(ctx, env)
	receivers := newReceivers(1)
	defer receivers.Close()
	ids, err := createAlertingEndpoints(ctx, env, receivers[0].URL(), n)
	defer func() {
		if len(ids) > 0 {
			_, _ = env.DB.Exec(context.WithoutCancel(ctx), `/* bench-drain */ DELETE FROM endpoints WHERE id = ANY($1::uuid[])`, ids)
		}
	}()
	if err != nil {
		return Table{}, err
	}
	setAlerts := func(ctx context.Context, on bool) error {
		q, oldest := any(nil), any(nil)
		if on {
			q, oldest = 1000, 600
		}
		if _, err := env.DB.Exec(ctx, `/* bench-drain */ UPDATE endpoints SET backlog_alert_queued = $2, backlog_alert_oldest_seconds = $3 WHERE id = ANY($1::uuid[])`, ids, q, oldest); err != nil {
			return fmt.Errorf("set the endpoints' backlog alerts: %w", err)
		}
		return nil
	}
	window6 := func(ctx context.Context) {
		select {
		case <-ctx.Done():
		case <-time.After(6 * time.Second):
		}
	}
	t, err := env.Repeat(ctx, metrics, func(ctx context.Context, run int) (s Sample, err error) {
		s.Values = map[string]float64{}
		if err := setAlerts(ctx, false); err != nil {
			return s, fmt.Errorf("unset the alerts: %w", err)
		}
		window6(ctx)
		off := env.idleCPU(ctx, window)
		if err := setAlerts(ctx, true); err != nil {
			return s, fmt.Errorf("set the alerts: %w", err)
		}
		window6(ctx)
		if pgss {
			_, _ = env.DB.Exec(ctx, `/* bench-drain */ SELECT pg_stat_statements_reset()`)
		}
		on := env.idleCPU(ctx, window)
		if pgss {
			var calls int64
			var ms float64
			err := env.DB.QueryRow(ctx, `/* bench-drain */ SELECT coalesce(sum(calls), 0)::bigint, coalesce(sum(total_exec_time), 0)::float8
				FROM pg_stat_statements WHERE query LIKE '%backlog_alerted_at IS NOT NULL%' AND query NOT LIKE '%bench-drain%'`).Scan(&calls, &ms)
			if err == nil && calls > 0 {
				pages := (n + 999) / 1000
				s.Values["checks, alerts set"] = float64(calls) / float64(pages)
				s.Values["check statement, Postgres time per check"] = ms / (float64(calls) / float64(pages))
			}
		}
		s.Values["Sluice + Postgres, alerts set"] = on.cores(on.sluice + on.postgres)
		s.Values["Sluice + Postgres, alerts unset"] = off.cores(off.sluice + off.postgres)
		s.Values["Postgres, added"] = on.cores(on.postgres) - off.cores(off.postgres)
		s.Values["Sluice, added"] = on.cores(on.sluice) - off.cores(off.sluice)
		s.Values["added by the checks"] = s.Values["Postgres, added"] + s.Values["Sluice, added"]
		s.CPU = on.add(off)
		if o := max(on.others(), off.others()); o > 0.1 {
			s.Note = fmt.Sprintf("other processes used %.2f cores during a window", o)
		}
		return s, nil
	})
	t.Notes = append(t.Notes, fmt.Sprintf("%d endpoints with a backlog alert, none with a backlog; windows of %s", n, window))
	if pgssNote != "" {
		t.Notes = append(t.Notes, pgssNote)
	}
	return t, err
}

// createAlertingEndpoints creates n endpoints on url with a backlog alert,
// 16 at a time, and returns their ids (those created, on an error too).
func createAlertingEndpoints(ctx context.Context, env *Env, url string, n int) ([]string, error) {
	var (
		mu      sync.Mutex
		ids     = make([]string, 0, n)
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	body := map[string]any{"url": url, "max_in_flight": 1, "backlog_alert": map[string]any{"queued": 1000, "oldest_seconds": 600}}
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				var ep struct {
					ID string `json:"id"`
				}
				if err := env.API.do(ctx, http.MethodPost, "/v1/endpoints", body, http.StatusCreated, &ep); err != nil {
					errOnce.Do(func() { first = fmt.Errorf("create endpoint: %w", err) })
					return
				}
				mu.Lock()
				ids = append(ids, ep.ID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ids, first
}

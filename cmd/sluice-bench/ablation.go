package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/pprof/profile"
	"github.com/jackc/pgx/v5"
)

// The ablation scenarios: what each feature's hot-path work costs a plain
// delivery, on single-1's and single-100's loads (a tenant that uses none
// of the features). Switching a feature off and measuring the difference
// cannot tell a cost under this machine's run-to-run spread (tens of
// percent), and a feature a plain delivery should not pay for costs a few
// percent at most. So these attribute instead, run by run:
//   - Sluice: a CPU profile of sluice over the load (from the first post
//     on). A sample is a feature's when the frame nearest its leaf that is
//     Sluice's own code (or a feature's library: OpenTelemetry, Prometheus,
//     slog) is the feature's: what a library does is its caller's, and a
//     middleware's cost is what it does itself, not the handler it wraps.
//     A feature's CPU per delivery is its share of the samples × Sluice's
//     CPU per delivery (read from /proc as elsewhere). The collector's
//     work for a feature's allocations counts only where it assists the
//     allocating goroutine.
//   - Postgres: pg_stat_statements over the same window; a feature's
//     statements are those named by its queries.
// A feature free until used reads 0 statements and next to no CPU.

// ablationFeature is a feature as the profile and the statements show it.
type ablationFeature struct {
	name    string
	files   []string // a frame is the feature's when its file or function name contains one of these
	queries []string // its statements' names (sqlc's)
}

var ablationFeatures = []ablationFeature{
	{name: "tracing", files: []string{sluiceModule + "internal/tracing.", "/internal/dispatch/trace.go", "go.opentelemetry.io/"}},
	{name: "audit", files: []string{"/internal/control/audit.go"}, queries: []string{"InsertAuditEntry"}},
	{name: "the shared API bucket", files: []string{sluiceModule + "internal/apirate.", "/internal/httpapi/ratelimit.go"},
		queries: []string{"LeaseAPITokens", "CreateAPIBucket", "TenantAPIRate"}},
	{name: "API keys, sessions and roles", files: []string{"/internal/httpapi/auth.go", sluiceModule + "internal/apikey.", sluiceModule + "internal/member.", "/internal/app/session.go"},
		queries: []string{"AuthenticateAPIKey", "GetAPIKey", "DashboardSession", "GetMember", "MemberByEmail"}},
	{name: "text checks", files: []string{sluiceModule + "internal/textcheck.", "/internal/httpapi/text.go"}},
	{name: "event schemas", files: []string{sluiceModule + "internal/eventschema."}, queries: []string{"EventSchemas"}},
	{name: "idempotency keys", files: []string{"/internal/fanout/idempotent.go"},
		queries: []string{"LockIdempotencyKey", "RecentEventByIdempotencyKey"}},
	{name: "payload filters", files: []string{sluiceModule + "internal/filter."}, queries: []string{"MatchFilters", "SubscriptionFilters"}},
	{name: "FIFO lines and unrouted events", files: []string{"/internal/dispatch/fifo.go"},
		queries: []string{"FIFOHeads", "ClaimFIFODeliveries", "EndpointOrdering", "LockEndpointOrdering", "BackfillFIFO", "MarkUnrouted", "MarkRouted"}},
	{name: "coalescing", queries: []string{"CoalesceDelivery", "NewerCoalescedExists"}},
	{name: "pull delivery (poll stamps)", files: []string{sluiceModule + "internal/poll.", "(*Nudger).PollStamp", "(*Nudger).stampLocked",
		"(*Nudger).gapLocked", "(*Nudger).notifyPollIn", "(*Nudger).setListening"},
		queries: []string{"PollEndpoints", "PollEndpoint", "LockPollCursor", "PlacePollDeliveries", "MarkPollDelivered", "SavePollCursor", "PollPage"}},
	{name: "payload encryption", files: []string{sluiceModule + "internal/secretbox."}, queries: []string{"CurrentDataKey", "DataKey"}},
	{name: "large payloads", files: []string{"/internal/dispatch/large.go", "/internal/dispatch/shared.go"},
		queries: []string{"LargePayload", "NextLargeEvents"}},
	{name: "adaptive rates", files: []string{"/internal/flow/adaptive.go"}, queries: []string{"InsertEffectiveRateChange"}},
	{name: "rate limit, circuit and throttle state", files: []string{"/internal/flow/bucket.go", "/internal/flow/circuit.go", "/internal/flow/throttle.go", "/internal/dispatch/flowstate.go", "/internal/dispatch/circuit.go"},
		queries: []string{"SaveFlow", "UpsertThrottle", "DeleteThrottle", "DisableEndpoint"}},
	{name: "delivery options (auth, OAuth, mTLS, destinations)", files: []string{"/internal/dispatch/oauth.go"},
		queries: []string{"EndpointToken", "TakeTokenRefresh", "SaveToken", "EndpointTLSKey", "EndpointDestinationURL"}},
	{name: "operational events and alerts", files: []string{sluiceModule + "internal/notify.", "/internal/dispatch/alarm.go"},
		queries: []string{"Notify", "InsertAlert", "BacklogsToCheck", "RaiseBacklogAlert", "RearmBacklogAlerts"}},
	{name: "metrics", files: []string{"github.com/prometheus/", sluiceModule + "internal/metrics.", "/internal/dispatch/observe.go", "/internal/httpapi/observe.go"}},
	{name: "logging", files: []string{"log/slog/"}},
}

func ablationScenarios() []Scenario {
	return []Scenario{
		ablationScenario("ablation", "single-1", single1Load, 4*time.Second),
		ablationScenario("ablation-100", "single-100", single100Load, 10*time.Second),
	}
}

func ablationScenario(name, of string, load func(*Env) e2eLoad, window time.Duration) Scenario {
	return Scenario{
		Name:  name,
		Title: "What each feature costs a plain delivery: " + of + "'s load",
		What: of + "'s load (`make bench-compare`) on plain endpoints of a tenant that uses none of the features. " +
			"Per run, a CPU profile of sluice over the first " + window.String() + " from the first post and " +
			"pg_stat_statements from the first post to the last delivery: a feature's Sluice CPU per delivery is the " +
			"share of the profile's samples whose nearest frame of Sluice's own code (or of the feature's library: " +
			"OpenTelemetry, Prometheus, slog) is the feature's, × Sluice's CPU per delivery; so a middleware counts what " +
			"it does, not the handler it wraps. Its statements are those of its queries. A feature a plain delivery does not pay for reads 0 statements and " +
			"next to no CPU. Needs pg_stat_statements for the statements (as `make bench-compare` has it).",
		MinTimeout: 4 * time.Minute,
		Run: func(ctx context.Context, env *Env) (Table, error) {
			return ablationRun(ctx, env, name, load(env), window)
		},
	}
}

func ablationMetrics() []Metric {
	metrics := []Metric{{Name: "Sluice CPU per delivery", Unit: "µs"}, {Name: "statements per delivery"}}
	for _, f := range ablationFeatures {
		metrics = append(metrics, Metric{Name: f.name + ": Sluice CPU per delivery", Unit: "µs"},
			Metric{Name: f.name + ": statements per delivery"})
	}
	return metrics
}

func ablationRun(ctx context.Context, env *Env, name string, load e2eLoad, window time.Duration) (Table, error) {
	load.label, load.cost = "ablation"+load.label, false // the statements are read here
	receivers := newReceivers(load.endpoints)
	defer receivers.Close()
	var profiled func() (*profile.Profile, error)
	run := 0 // Repeat's
	counted, why := pgssReady(ctx, env)
	load.measuring = func(ctx context.Context) {
		if counted {
			if _, err := env.DB.Exec(ctx, `/* bench-drain */ SELECT pg_stat_statements_reset()`); err != nil {
				counted, why = false, err.Error()
			}
		}
		profiled = startProfile(ctx, env.DebugURL, window, filepath.Join(os.TempDir(), fmt.Sprintf("sluice-bench-%s-%d.pprof", name, run)))
	}
	load.measured = func(ctx context.Context, s *Sample, deliveries int) error {
		if counted {
			stmts, err := namedStatements(ctx, env.DB)
			if err != nil {
				return err
			}
			attributeStatements(s, stmts, deliveries)
		}
		p, err := profiled()
		if err != nil {
			return fmt.Errorf("profile sluice: %w", err)
		}
		attribute(s, p, deliveries)
		return nil
	}
	t, err := env.Repeat(ctx, ablationMetrics(), func(ctx context.Context, r int) (Sample, error) {
		run = r
		return e2eOnce(ctx, env, load, receivers, r)
	})
	t.Notes = append(t.Notes, fmt.Sprintf("%d events per run over %d endpoint(s), %d per request from %d clients; "+
		"each run's profile is kept as %s", load.events, load.endpoints, load.perRequest, load.clients,
		filepath.Join(os.TempDir(), "sluice-bench-"+name+"-<run>.pprof")))
	if !counted {
		t.Notes = append(t.Notes, "no statements counted: "+why)
	}
	return t, err
}

// startProfile starts a CPU profile of sluice over the next d, kept at
// path; the returned func waits for it.
func startProfile(ctx context.Context, debugURL string, d time.Duration, path string) func() (*profile.Profile, error) {
	type result struct {
		p   *profile.Profile
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, err := fetchCPUProfile(ctx, debugURL, d, path)
		done <- result{p, err}
	}()
	return func() (*profile.Profile, error) {
		r := <-done
		return r.p, r.err
	}
}

// attribute adds each feature's share of Sluice's CPU per delivery to s,
// whose CPU is measured.
func attribute(s *Sample, p *profile.Profile, deliveries int) {
	sluice := perEvent(s.CPU.sluice, max(deliveries, 1)) * 1000 // µs
	s.Values["Sluice CPU per delivery"] = sluice
	var total int64
	shares := make([]int64, len(ablationFeatures))
	for _, sample := range p.Sample {
		n := sample.Value[len(sample.Value)-1] // cpu nanoseconds
		total += n
		if i := owner(sample); i >= 0 {
			shares[i] += n
		}
	}
	for i, f := range ablationFeatures {
		v := 0.0
		if total > 0 {
			v = float64(shares[i]) / float64(total) * sluice
		}
		s.Values[f.name+": Sluice CPU per delivery"] = v
	}
}

// sluiceModule prefixes the names of Sluice's own functions: a package's
// are sluiceModule + "internal/poll.", say, where a file pattern
// "/internal/poll/" would match Go's own internal/poll too.
const sluiceModule = "github.com/sluice-dev/sluice/"

// owner is the index of the feature a sample's CPU is spent for, or -1:
// that of the frame nearest the leaf that is either Sluice's own or a
// feature's library (OpenTelemetry, Prometheus, slog). So a library
// call's CPU is its caller's, and a middleware's is only what it does
// itself, not what the handler it wraps does.
func owner(sample *profile.Sample) int {
	for _, loc := range sample.Location { // leaf first
		for _, line := range loc.Line { // innermost (inlined) first
			if line.Function == nil {
				continue
			}
			fn := line.Function
			for i, f := range ablationFeatures {
				for _, pattern := range f.files {
					if strings.Contains(fn.Filename, pattern) || strings.Contains(fn.Name, pattern) {
						return i
					}
				}
			}
			if strings.HasPrefix(fn.Name, sluiceModule) {
				return -1
			}
		}
	}
	return -1
}

// queryName finds a sqlc statement's name ("-- name: X :one").
var queryName = regexp.MustCompile(`-- name: (\w+)`)

// namedStatements are the calls pg_stat_statements counted per statement
// name since its reset (unnamed ones under "").
func namedStatements(ctx context.Context, db *pgx.Conn) (map[string]int64, error) {
	rows, err := db.Query(ctx, `/* bench-drain */
		SELECT query, calls FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND query NOT LIKE '%bench-drain%' AND query NOT ILIKE '%pg_stat_%'`)
	if err != nil {
		return nil, fmt.Errorf("read pg_stat_statements: %w", err)
	}
	calls := map[string]int64{}
	var query string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&query, &n}, func() error {
		name := ""
		if m := queryName.FindStringSubmatch(query); m != nil {
			name = m[1]
		}
		calls[name] += n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read pg_stat_statements: %w", err)
	}
	return calls, nil
}

func attributeStatements(s *Sample, calls map[string]int64, deliveries int) {
	per := float64(max(deliveries, 1))
	var all int64
	for _, n := range calls {
		all += n
	}
	s.Values["statements per delivery"] = float64(all) / per
	for _, f := range ablationFeatures {
		var n int64
		for _, q := range f.queries {
			n += calls[q]
		}
		s.Values[f.name+": statements per delivery"] = float64(n) / per
	}
}

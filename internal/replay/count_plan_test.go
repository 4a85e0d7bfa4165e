package replay_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/replay"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// Sizes of TestCountReplayablePlan: the endpoint counted has 3,000 dead
// deliveries and 3,000 delivered ones; 10 other endpoints of its tenant
// have 500 dead ones each, and one of another tenant 3,000. The count
// stops at 11.
const (
	countPlanRows     = 3000
	countPlanSiblings = 10
	countPlanMost     = 11
)

// TestCountReplayablePlan: counting an endpoint's replayable dead
// deliveries reads the endpoint's entries of deliveries_endpoint_dead_idx
// and nothing else of deliveries but each event's own deliveries (never
// another endpoint's or tenant's dead ones, never the endpoint's delivered
// ones), at most @most of them, in the plan made without the values (the
// status a parameter) and in the one made for them; the delivered branch
// is never run. Staging them (StageReplay) reads the same entries, all of
// them, and nothing else of deliveries but each event's own deliveries.
func TestCountReplayablePlan(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx := t.Context()
	ep := storetest.NewEndpoint(t, f, "counted")
	other, err := f.Store.CreateEndpoint(ctx, f.TenantB.ID, sluice.EndpointSettings{URL: "https://example.com/b", MaxInFlight: 10}, storetest.Secret)
	require.NoError(t, err)
	_, err = f.Store.Pool().Exec(ctx, `
		WITH ev AS (
			INSERT INTO events (id, tenant_id, type, payload)
			SELECT sluice_uuidv7(), $1, 'done', '{}' FROM generate_series(1, $3::int)
			RETURNING id)
		INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, status)
		SELECT sluice_uuidv7(), $1, ev.id, $2, 'done', 'delivered' FROM ev`, f.TenantA.ID, ep, countPlanRows)
	require.NoError(t, err)
	storetest.DeadBacklog(t, f.Store, f.TenantB.ID, other.ID, countPlanRows)
	for i := range countPlanSiblings {
		storetest.DeadBacklog(t, f.Store, f.TenantA.ID, storetest.NewEndpoint(t, f, "sibling"+strconv.Itoa(i)), 500)
	}
	storetest.DeadBacklog(t, f.Store, f.TenantA.ID, ep, countPlanRows)

	deadIdx := partitionIndexes(t, f, "deliveries_endpoint_dead_idx")
	eventIdx := partitionIndexes(t, f, "deliveries_event_endpoint_idx", "deliveries_replay_event_idx")
	// requireEventProbes checks that plan reads the other deliveries of an
	// event (alias o) through the event's two partial indexes only.
	requireEventProbes := func(plan, when string) {
		probes := regexp.MustCompile(`(?:Index Scan|Index Only Scan|Bitmap Index Scan|Seq Scan) (?:using (\S+) )?on (\S+) o(?:_\d+)? [^\n]*\(actual time=\S+ rows=(\d+) loops=\d+\)`).FindAllStringSubmatch(plan, -1)
		require.NotEmpty(t, probes, "%s looks up the events' other deliveries: %s", when, plan)
		for _, p := range probes {
			if p[1] == "" && p[3] == "0" {
				continue // an empty partition (deliveries_kept), read whole
			}
			require.Regexp(t, `^`+eventIdx+`$`, p[1], "%s reads an event's deliveries through its two indexes only: %s", when, p[0])
		}
	}

	// The settings CountReplayable runs with.
	var limitSets []string
	for _, s := range replay.CountSettings {
		limitSets = append(limitSets, "SET "+s[0]+" = "+s[1])
	}
	sql := storetest.QuerySQL(t, "deliveries.sql", "CountReplayable", "status", "endpoint_id", "tenant_id")
	sql = strings.NewReplacer("sqlc.narg(since)", "$4", "sqlc.narg(until)", "$5", "@most", "$6").Replace(sql)
	args := func(status string) string {
		return "'" + status + "', '" + ep.String() + "', '" + f.TenantA.ID.String() + "', NULL, NULL, " + strconv.Itoa(countPlanMost)
	}
	for when, plan := range map[string]string{
		"generic plan": storetest.ExplainGeneric(t, f.Store.Pool(), sql, args("dead"), limitSets...),
		"custom plan":  storetest.ExplainGeneric(t, f.Store.Pool(), sql, args("dead"), append(limitSets, "SET plan_cache_mode = force_custom_plan")...),
	} {
		t.Logf("count of an endpoint's dead deliveries, %s:\n%s", when, plan)
		m := regexp.MustCompile(`Aggregate .*\(actual time=\S+ rows=1 `).FindString(plan)
		require.NotEmpty(t, m, when)
		scans := regexp.MustCompile(`(?:Index Scan|Index Only Scan|Bitmap Index Scan|Seq Scan) (?:using|on) (\S+) on (\S+) d(?:_\d+)? .*\(actual time=\S+ rows=(\d+) loops=(\d+)\)`).FindAllStringSubmatch(plan, -1)
		require.NotEmpty(t, scans, "%s reads the endpoint's dead entries", when)
		var read int
		for _, s := range scans {
			require.Regexp(t, `^`+deadIdx+`$`, s[1], "%s reads deliveries of the endpoint through the dead index only: %s", when, s[0])
			n, err := strconv.Atoi(s[3])
			require.NoError(t, err)
			read += n
		}
		require.LessOrEqual(t, read, countPlanMost, "%s reads at most @most dead entries", when)
		require.NotContains(t, plan, "Bitmap Heap Scan on deliveries", when)
		require.NotRegexp(t, `Seq Scan on deliveries\S* d(?:_\d+)? [^\n]*\(actual time=\S+ rows=[1-9]`, plan, when)
		requireEventProbes(plan, when)
	}

	// Staging them (StageReplay, run without settings) reads the
	// endpoint's dead entries too, all of them, and nothing else.
	sql = storetest.QuerySQL(t, "deliveries.sql", "StageReplay", "id", "tenant_id", "endpoint_id", "status")
	sql = strings.NewReplacer("sqlc.narg(since)", "$5", "sqlc.narg(until)", "$6").Replace(sql)
	plan := storetest.ExplainGeneric(t, f.Store.Pool(), sql,
		"'"+uuid.NewString()+"', '"+f.TenantA.ID.String()+"', '"+ep.String()+"', 'dead', NULL, NULL")
	t.Logf("staging an endpoint's dead deliveries, generic plan:\n%s", plan)
	scans := regexp.MustCompile(`(?:Bitmap Index Scan on (\S+)|Index (?:Only )?Scan using (\S+) on \S+ d(?:_\d+)?) .*\(actual time=\S+ rows=(\d+) `).FindAllStringSubmatch(plan, -1)
	require.NotEmpty(t, scans)
	var read int
	for _, s := range scans {
		require.Regexp(t, `^`+deadIdx+`$`, s[1]+s[2], "staging reads deliveries of the endpoint through the dead index only: %s", s[0])
		n, err := strconv.Atoi(s[3])
		require.NoError(t, err)
		read += n
	}
	require.Equal(t, countPlanRows, read, "staging reads each of the endpoint's dead entries once")
	require.NotRegexp(t, `Seq Scan on deliveries\S* d(?:_\d+)? [^\n]*\(actual time=\S+ rows=[1-9]`, plan)
	requireEventProbes(plan, "staging")
}

// partitionIndexes is a pattern matching the partitions' copies of the
// indexes of deliveries named.
func partitionIndexes(t *testing.T, f storetest.Fixture, names ...string) string {
	t.Helper()
	rows, err := f.Store.Pool().Query(t.Context(), `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = ANY($1::regclass[])`, names)
	require.NoError(t, err)
	var copies []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		copies = append(copies, regexp.QuoteMeta(n))
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, copies, "each partition has its copy of %v", names)
	return `(?:` + strings.Join(copies, `|`) + `)`
}

// TestCountReplayableCapped: the count is exact up to sluice.ReplayCountCap
// and ReplayCountCap+1 past it, while the replay queues every one.
func TestCountReplayableCapped(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	few, many := storetest.NewEndpoint(t, f, "few"), storetest.NewEndpoint(t, f, "many")
	storetest.DeadBacklog(t, f.Store, f.TenantA.ID, few, 7)
	storetest.DeadBacklog(t, f.Store, f.TenantA.ID, many, sluice.ReplayCountCap+200)
	dead := sluice.ReplayFilter{Status: sluice.DeliveryDead}
	n, err := replay.CountReplayable(t.Context(), f.Store, f.TenantA.ID, few, dead)
	require.NoError(t, err)
	require.EqualValues(t, 7, n)
	n, err = replay.CountReplayable(t.Context(), f.Store, f.TenantA.ID, many, dead)
	require.NoError(t, err)
	require.EqualValues(t, sluice.ReplayCountCap+1, n, "past the cap, the count says only that there are more")
	n, err = replay.CountReplayable(t.Context(), f.Store, f.TenantA.ID, many, sluice.ReplayFilter{Status: sluice.DeliveryDelivered})
	require.NoError(t, err)
	require.Zero(t, n)
	queued, err := replay.Endpoint(t.Context(), f.Store, f.TenantA.ID, many, dead, f.Jobs)
	require.NoError(t, err)
	require.EqualValues(t, sluice.ReplayCountCap+200, queued, "the replay queues all of them")
}

package filter

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/textcheck"
)

// These tests run the compiled filters on Postgres, as routing does
// (jsonb_path_match(payload, path, silent => true)), and hold them to the
// reference evaluator. They need no tables, so they take the server of
// DATABASE_URL as it is (pgtest would import store, which imports filter).

// pgMatch evaluates each (payload, jsonpath) pair on Postgres in one
// statement. A NULL answer (unknown) is reported as an error: the compiled
// predicates are meant to be total.
func pgMatch(t *testing.T, payloads, paths []string) []bool {
	t.Helper()
	ctx := context.Background()
	url := os.Getenv("DATABASE_URL")
	require.NotEmpty(t, url, "DATABASE_URL is not set: run the tests with `make test`, which starts a throwaway Postgres")
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
		SELECT jsonb_path_match(t.payload::jsonb, t.path::jsonpath, silent => true)
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(payload, path, i)
		ORDER BY t.i`, payloads, paths)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (bool, error) {
		var b *bool
		if err := r.Scan(&b); err != nil {
			return false, err
		}
		if b == nil {
			return false, fmt.Errorf("a predicate was unknown (NULL)")
		}
		return *b, nil
	})
	require.NoError(t, err)
	require.Len(t, out, len(payloads))
	return out
}

func TestJSONPathMatchCases(t *testing.T) {
	t.Parallel()
	var payloads, paths []string
	for _, tc := range matchCases {
		f, err := Parse([]byte(tc.filter))
		require.NoError(t, err, tc.name)
		payloads, paths = append(payloads, tc.payload), append(paths, f.JSONPath())
	}
	got := pgMatch(t, payloads, paths)
	for i, tc := range matchCases {
		require.Equal(t, tc.want, got[i], "%s: filter %s on %s\njsonpath: %s", tc.name, tc.filter, tc.payload, paths[i])
	}
}

// TestJSONPathAgreesWithMatch generates random payloads and filters over a
// small vocabulary (so that paths often exist and values often meet) and
// requires Postgres's answer to equal Match's for every pair. The seed is
// fixed, so a failure repeats; FILTER_SEED=n tries another.
func TestJSONPathAgreesWithMatch(t *testing.T) {
	t.Parallel()
	const cases = 20000
	seed := uint64(29)
	if s := os.Getenv("FILTER_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = n
	}
	g := &gen{r: rand.New(rand.NewPCG(seed, seed))}
	type pair struct {
		filter, payload string
		f               *Filter
	}
	pairs := make([]pair, 0, cases)
	for len(pairs) < cases {
		text := g.filter(0)
		f, err := Parse([]byte(text))
		require.NoError(t, err, "generated filter %s", text)
		for range 4 { // each filter on a few payloads
			pairs = append(pairs, pair{filter: text, payload: g.payload(), f: f})
		}
	}
	payloads, paths := make([]string, len(pairs)), make([]string, len(pairs))
	for i, p := range pairs {
		payloads[i], paths[i] = p.payload, p.f.JSONPath()
	}
	got := pgMatch(t, payloads, paths)
	matched := 0
	for i, p := range pairs {
		want, err := p.f.Match([]byte(p.payload))
		require.NoError(t, err)
		if want {
			matched++
		}
		if got[i] != want {
			t.Fatalf("case %d of seed %d: Match says %t, Postgres %t\nfilter:   %s\npayload:  %s\njsonpath: %s",
				i, seed, want, got[i], p.filter, p.payload, paths[i])
		}
	}
	t.Logf("seed %d: %d cases agree, %d of them matching", seed, len(pairs), matched)
	// The generator is useful only if both answers are common.
	require.Greater(t, matched, len(pairs)/10)
	require.Less(t, matched, len(pairs)*9/10)
}

// gen makes random filters and payloads as JSON text.
type gen struct{ r *rand.Rand }

var (
	genKeys    = []string{"a", "b", "c", "0", "1"}
	genNumbers = []string{"0", "-0", "1", "1.0", "10e-1", "2", "-1", "2.5", "1e2", "100", "99.999",
		"12345678901234567890", "12345678901234567891", "1e-7", "-2.5"}
	genStrings = []string{"", "a", "ab", "abc", "b", "B", "é", "1", "a\"b", "0"}
)

func (g *gen) pick(list []string) string { return list[g.r.IntN(len(list))] }

// value is a random JSON value nested at most depth more levels.
func (g *gen) value(depth int) string {
	n := 6
	if depth > 0 {
		n = 8
	}
	switch g.r.IntN(n) {
	case 0, 1:
		return g.pick(genNumbers)
	case 2, 3:
		return strconv.Quote(g.pick(genStrings))
	case 4:
		return []string{"true", "false", "null"}[g.r.IntN(3)]
	case 5:
		return strconv.Quote(g.pick(genStrings))
	case 6:
		var els []string
		for range g.r.IntN(4) {
			els = append(els, g.value(depth-1))
		}
		return "[" + strings.Join(els, ",") + "]"
	default:
		return g.object(depth-1, g.r.IntN(4))
	}
}

// object is a random object of up to n distinct keys.
func (g *gen) object(depth, n int) string {
	var members []string
	seen := map[string]bool{}
	for range n {
		k := g.pick(genKeys)
		if seen[k] {
			continue
		}
		seen[k] = true
		members = append(members, strconv.Quote(k)+":"+g.value(depth))
	}
	return "{" + strings.Join(members, ",") + "}"
}

func (g *gen) payload() string { return g.object(3, 2+g.r.IntN(4)) }

func (g *gen) path() string {
	segs := make([]string, 1+g.r.IntN(3))
	for i := range segs {
		segs[i] = g.pick(genKeys)
	}
	return strings.Join(segs, ".")
}

// filter is a random filter object, with combinators down to depth 2.
func (g *gen) filter(depth int) string {
	var members []string
	seen := map[string]bool{}
	for range 1 + g.r.IntN(2) {
		key, val := g.member(depth)
		if seen[key] {
			continue
		}
		seen[key] = true
		members = append(members, strconv.Quote(key)+":"+val)
	}
	return "{" + strings.Join(members, ",") + "}"
}

func (g *gen) member(depth int) (string, string) {
	if depth < 2 {
		switch g.r.IntN(6) {
		case 0, 1:
			op := []string{"$and", "$or"}[g.r.IntN(2)]
			var subs []string
			for range 1 + g.r.IntN(3) {
				subs = append(subs, g.filter(depth+1))
			}
			return op, "[" + strings.Join(subs, ",") + "]"
		case 2:
			return "$not", g.filter(depth + 1)
		}
	}
	path := g.path()
	if g.r.IntN(3) == 0 {
		return path, g.value(2) // a literal
	}
	ops := map[string]string{}
	for range 1 + g.r.IntN(2) {
		op, arg := g.operator()
		ops[op] = arg
	}
	var members []string
	for _, op := range slices.Sorted(maps.Keys(ops)) {
		members = append(members, strconv.Quote(op)+":"+ops[op])
	}
	return path, "{" + strings.Join(members, ",") + "}"
}

func (g *gen) operator() (string, string) {
	switch op := []string{"$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "$exists", "$prefix"}[g.r.IntN(10)]; op {
	case "$eq", "$ne":
		return op, g.value(2)
	case "$in", "$nin":
		var els []string
		for range g.r.IntN(4) {
			els = append(els, g.value(1))
		}
		return op, "[" + strings.Join(els, ",") + "]"
	case "$exists":
		return op, strconv.FormatBool(g.r.IntN(2) == 0)
	case "$prefix":
		return op, strconv.Quote(g.pick(genStrings))
	default:
		if g.r.IntN(2) == 0 {
			return op, g.pick(genNumbers)
		}
		return op, strconv.Quote(g.pick(genStrings))
	}
}

// The generator's output is JSON; keep it honest.
func TestGeneratorMakesJSON(t *testing.T) {
	t.Parallel()
	g := &gen{r: rand.New(rand.NewPCG(1, 1))}
	for range 200 {
		require.True(t, json.Valid([]byte(g.payload())))
		require.True(t, json.Valid([]byte(g.filter(0))))
	}
}

// TestNumbersFitAsPostgresSays checks textcheck.NumberFits, which the API
// uses to refuse payloads (and Parse filters) that routing could not read
// as jsonb, against Postgres at the boundaries.
func TestNumbersFitAsPostgresSays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := os.Getenv("DATABASE_URL")
	require.NotEmpty(t, url, "DATABASE_URL is not set: run the tests with `make test`, which starts a throwaway Postgres")
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, n := range []string{
		"0", "1e1000", "1e1001", "-1e-1000", "1e131071", "1e131072", "9" + strings.Repeat("0", 131071),
		"1" + strings.Repeat("0", 131072), "0.000001e131076", "0.000001e131077", "0.1e131072", "0.1e131073",
		"1e-16383", "1e-16384", "0." + strings.Repeat("0", 16382) + "1", "0." + strings.Repeat("0", 16383) + "1",
		"1." + strings.Repeat("0", 16383), "1." + strings.Repeat("0", 16384), "0e-16383", "0e-16384",
		"1.5e-16382", "1.5e-16383", "1e99999999999", "1e-99999999999", "1E+2",
	} {
		var ok bool
		_, err := conn.Exec(ctx, "SELECT $1::text::jsonb", `{"n": `+n+`}`)
		if err == nil {
			ok = true
		}
		require.Equal(t, ok, textcheck.NumberFits(n), "%.40s (%d characters): Postgres says %v", n, len(n), err)
	}
}

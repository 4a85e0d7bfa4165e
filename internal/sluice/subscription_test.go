package sluice

import (
	"slices"
	"testing"
)

// TestCandidatePatternsCoverEveryMatch: fan-out reads only subscriptions
// holding one of CandidatePatterns(t), so every pattern that matches t must
// be among them, and none that does not.
func TestCandidatePatternsCoverEveryMatch(t *testing.T) {
	t.Parallel()
	types := []string{"a", "a.b", "a.b.c", "order.created", "order.created.v2", "x-y.z_w",
		"sluice.test", "sluice.endpoint.disabled", "sluicer.x"}
	patterns := []string{"*", "a", "a.*", "a.b", "a.b.*", "a.b.c", "a.b.c.*", "b.*", "order.*", "order.created",
		"order.created.*", "order.c.*", "x-y.*", "x-y.z_w", "ab.*", "sluice.*", "sluice.endpoint.*",
		"sluice.endpoint.disabled", "sluicer.*"}
	for _, typ := range types {
		cands := CandidatePatterns(typ)
		for _, p := range patterns {
			if got, want := slices.Contains(cands, p), MatchEventType(p, typ); got != want {
				t.Errorf("type %q, pattern %q: candidate %v, matches %v", typ, p, got, want)
			}
		}
	}
}

// TestStarNeverMatchesSluiceTypes: "*" leaves Sluice's own types out, so no
// subscription made before they existed changes meaning; "sluice.*" and
// exact names reach them.
func TestStarNeverMatchesSluiceTypes(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{"sluice.test", "sluice.endpoint.disabled", "sluice.delivery.dead"} {
		if MatchEventType("*", typ) {
			t.Errorf("* matches %q", typ)
		}
		if !MatchEventType("sluice.*", typ) || !MatchEventType(typ, typ) {
			t.Errorf("sluice.* or its own name does not match %q", typ)
		}
	}
	if !MatchEventType("*", "sluicer.x") {
		t.Error("* must match sluicer.x: only the sluice. prefix is reserved")
	}
}

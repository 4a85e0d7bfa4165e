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
	types := []string{"a", "a.b", "a.b.c", "order.created", "order.created.v2", "x-y.z_w"}
	patterns := []string{"*", "a", "a.*", "a.b", "a.b.*", "a.b.c", "a.b.c.*", "b.*", "order.*", "order.created",
		"order.created.*", "order.c.*", "x-y.*", "x-y.z_w", "ab.*"}
	for _, typ := range types {
		cands := CandidatePatterns(typ)
		for _, p := range patterns {
			if got, want := slices.Contains(cands, p), MatchEventType(p, typ); got != want {
				t.Errorf("type %q, pattern %q: candidate %v, matches %v", typ, p, got, want)
			}
		}
	}
}

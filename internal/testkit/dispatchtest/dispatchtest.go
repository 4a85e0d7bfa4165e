// Package dispatchtest changes an endpoint's queue and flow state the way a
// dispatch run does, for tests of what reads them (API, dashboard). It is
// apart from storetest, which dispatch's own tests import.
package dispatchtest

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/store"
)

// SetFlow changes an endpoint's flow state (circuit, throttle, token
// bucket) the way a dispatcher saves it, with the endpoint row locked.
func SetFlow(t testing.TB, st *store.Store, endpointID uuid.UUID, change func(*dispatch.Flow)) {
	t.Helper()
	ctx := context.Background()
	tx, err := dispatch.NewDB(st).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	locked, err := tx.LockFlow(ctx, endpointID)
	if err != nil {
		t.Fatal(err)
	}
	after := locked.Flow
	change(&after)
	if err := tx.SaveFlow(ctx, endpointID, locked.Flow, after); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// Settle claims every due delivery of an endpoint (up to 10,000) and
// records outcome of each, as a dispatcher would after sending them. It
// returns how many it settled.
func Settle(t testing.TB, st *store.Store, endpointID uuid.UUID, outcome func(dispatch.Claimed) dispatch.Outcome) int {
	t.Helper()
	ctx := context.Background()
	db := dispatch.NewDB(st)
	claimed, err := db.ClaimUnlocked(ctx, endpointID, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := make([]dispatch.Outcome, len(claimed))
	for i, c := range claimed {
		outcomes[i] = outcome(c)
	}
	if err := db.RecordUnlocked(ctx, outcomes); err != nil {
		t.Fatal(err)
	}
	return len(claimed)
}

// Nudger returns a Nudger on st that inserts jobs with q, as app builds
// the process's: for tests of what is given one.
func Nudger(st *store.Store, q *jobs.Queue) *dispatch.Nudger {
	return dispatch.NewNudger(st, q, dispatch.NudgerConfig{})
}

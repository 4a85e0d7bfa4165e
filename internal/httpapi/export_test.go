package httpapi

import (
	"context"
	"maps"
	"testing"

	"github.com/sluice-dev/sluice/internal/audit"
	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/ingest"
	"github.com/sluice-dev/sluice/internal/store"
)

// StartIngest returns an Ingester on st, as the app wires one for the API:
// started, and stopped when the test ends.
func StartIngest(t testing.TB, st *store.Store, nudger *dispatch.Nudger) *ingest.Ingester {
	t.Helper()
	in, err := ingest.New(st, ingest.Config{Nudger: nudger})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Stop)
	return in
}

// AuditActions is the table of audited routes, for the test that walks
// openapi.yaml against it.
var AuditActions = func() map[string]audit.Action {
	all := maps.Clone(auditActions)
	for k, a := range controlled {
		all[k] = audit.Action(a)
	}
	return all
}()

// PollWaiting is how many poll reads of a are waiting.
func PollWaiting(a *API) int { return a.poll.Waiting() }

// PollLookUps is how many times a's poll reads looked an endpoint up in
// the database.
func PollLookUps(a *API) int64 { return a.poll.LookUps() }

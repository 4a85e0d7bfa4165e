package dispatch

import (
	"context"
	"errors"

	"github.com/sluice-dev/sluice/internal/batch"
	"github.com/sluice-dev/sluice/internal/store"
)

// recorder stores the attempts of many endpoints' dispatch runs together
// (group commit, see package batch): under steady load each run records a
// batch of one or two attempts, and one statement per batch was most of the
// database's work. A run still waits for its attempts to commit before it
// claims again, so it never claims a delivery whose attempt is not yet
// recorded. A run's attempts that Postgres rejects (store.RowRejected) fail
// that run alone; the other runs' attempts are stored.
type recorder struct {
	store *store.Store
	batch *batch.Batcher[[]store.Outcome, struct{}]
}

// maxRecordRuns bounds the runs whose attempts one statement stores: at
// most max_in_flight (default 10) attempts each.
const maxRecordRuns = 100

func newRecorder(st *store.Store, committers int) *recorder {
	cfg := batch.Config{Committers: committers, MaxBatch: maxRecordRuns, Isolate: store.RowRejected}
	return &recorder{store: st, batch: batch.New(cfg, recordPlain(st))}
}

// recordPlain stores the attempts of a group of runs with one statement.
func recordPlain(st *store.Store) batch.CommitFunc[[]store.Outcome, struct{}] {
	return func(ctx context.Context, runs [][]store.Outcome) ([]struct{}, error) {
		var outcomes []store.Outcome
		for _, run := range runs {
			outcomes = append(outcomes, run...)
		}
		return make([]struct{}, len(runs)), st.RecordPlain(ctx, outcomes)
	}
}

// record stores outcomes, possibly with other runs', and returns once they
// are committed. After close it stores them on its own.
func (r *recorder) record(ctx context.Context, outcomes []store.Outcome) error {
	_, err := r.batch.Submit(ctx, outcomes)
	if errors.Is(err, batch.ErrClosed) {
		return r.store.RecordPlain(ctx, outcomes)
	}
	return err
}

func (r *recorder) close() { r.batch.Close() }

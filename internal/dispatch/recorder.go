package dispatch

import (
	"context"
	"errors"

	"github.com/sluice-dev/sluice/internal/batch"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// recorder stores the attempts of many endpoints' dispatch runs together
// (group commit, see package batch): under steady load each run records a
// batch of one or two attempts, and one statement per batch was most of the
// database's work. A run never claims a delivery whose attempt is not yet
// recorded: it claims after its last batch's position, or waits for its
// records first (pendingRecord). A run's attempts that Postgres rejects (sluice.RowRejected) fail
// that run alone; the other runs' attempts are stored.
type recorder struct {
	save  saveFunc
	batch *batch.Batcher[[]Outcome, struct{}]
}

// saveFunc stores attempts of any endpoints in one statement:
// DB.RecordUnlocked.
type saveFunc func(context.Context, []Outcome) error

// maxRecordRuns bounds the runs whose attempts one statement stores: at
// most max_in_flight (default 10) attempts each.
const maxRecordRuns = 100

// newRecorder returns a recorder storing with save, through committers
// concurrent statements.
func newRecorder(save saveFunc, committers int) *recorder {
	cfg := batch.Config{Committers: committers, MaxBatch: maxRecordRuns, Isolate: sluice.RowRejected, Inline: true}
	return &recorder{save: save, batch: batch.New(cfg, recordRuns(save))}
}

// recordRuns stores the attempts of a group of runs with one call of save.
func recordRuns(save saveFunc) batch.CommitFunc[[]Outcome, struct{}] {
	return func(ctx context.Context, runs [][]Outcome) ([]struct{}, error) {
		var outcomes []Outcome
		for _, run := range runs {
			outcomes = append(outcomes, run...)
		}
		return make([]struct{}, len(runs)), save(ctx, outcomes)
	}
}

// record stores outcomes, possibly with other runs', and returns once they
// are committed. After close it stores them on its own.
func (r *recorder) record(ctx context.Context, outcomes []Outcome) error {
	_, err := r.batch.Submit(ctx, outcomes)
	if errors.Is(err, batch.ErrClosed) {
		return r.save(ctx, outcomes)
	}
	return err
}

func (r *recorder) close() { r.batch.Close() }

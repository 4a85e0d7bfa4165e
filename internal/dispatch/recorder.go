package dispatch

import (
	"context"
	"sync"

	"github.com/sluice-dev/sluice/internal/store"
)

// recorder stores the attempts of many endpoints' dispatch runs together
// (group commit): under steady load each run records a batch of one or two
// attempts, and one statement per batch was most of the database's work.
// A run still waits for its attempts to commit before it claims again, so
// it never claims a delivery whose attempt is not yet recorded.
type recorder struct {
	store *store.Store
	reqs  chan recordRequest
	stop  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

type recordRequest struct {
	outcomes []store.Outcome
	done     chan error
}

// maxRecordBatch bounds the attempts stored by one statement.
const maxRecordBatch = 1000

func newRecorder(st *store.Store, committers int) *recorder {
	r := &recorder{store: st, reqs: make(chan recordRequest), stop: make(chan struct{})}
	for range committers {
		r.wg.Go(r.loop)
	}
	return r
}

// record stores outcomes, possibly with other runs', and returns once they
// are committed.
func (r *recorder) record(ctx context.Context, outcomes []store.Outcome) error {
	req := recordRequest{outcomes: outcomes, done: make(chan error, 1)}
	select {
	case r.reqs <- req:
	case <-r.stop:
		return r.store.RecordPlain(ctx, outcomes)
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-req.done
}

func (r *recorder) close() {
	r.once.Do(func() { close(r.stop) })
	r.wg.Wait()
}

func (r *recorder) loop() {
	for {
		var first recordRequest
		select {
		case first = <-r.reqs:
		case <-r.stop:
			return
		}
		batch, outcomes := []recordRequest{first}, first.outcomes
	gather:
		for len(outcomes) < maxRecordBatch {
			select {
			case req := <-r.reqs:
				batch = append(batch, req)
				outcomes = append(outcomes, req.outcomes...)
			default:
				break gather
			}
		}
		err := r.store.RecordPlain(context.Background(), outcomes)
		for _, req := range batch {
			req.done <- err
		}
	}
}

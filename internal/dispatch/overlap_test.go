package dispatch

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/jobs/jobstest"
	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// overlapHold bounds how long a test below holds a request or a record
// waiting for the overlap it checks: when the overlap does not happen, the
// run goes on after it, and the test fails on what it saw.
const overlapHold = 3 * time.Second

// holdFor holds until ch closes, or for overlapHold and then marks missed
// (when not nil).
func holdFor(ch <-chan struct{}, missed *atomic.Bool) {
	select {
	case <-ch:
	case <-time.After(overlapHold):
		if missed != nil {
			missed.Store(true)
		}
	}
}

// TestRunClaimsWhileItSends: a run draining a backlog claims its next
// batch while the receiver still holds every request of the first.
func TestRunClaimsWhileItSends(t *testing.T) {
	t.Parallel()
	early := make(chan struct{})
	var once atomic.Bool
	claimed := func(req ClaimRequest) {
		if req.After != (Position{}) && once.CompareAndSwap(false, true) {
			close(early)
		}
	}
	r := newDrain(t, 30, claimed, nil)
	var missed atomic.Bool
	r.recv.AnswerFunc(func(n int) receiver.Behavior {
		if n <= 10 {
			holdFor(early, &missed)
		}
		return receiver.Behavior{}
	})
	require.NoError(t, r.run(t))
	require.False(t, missed.Load(), "the next batch was claimed while the first was in flight")
	r.sentOnce(t, 30)
}

// TestRunSendsWhileItRecords: a run sends its next batches while the
// record of the first is still committing: the second, and the third
// while the second's record is queued behind it (maxPendingRecords).
func TestRunSendsWhileItRecords(t *testing.T) {
	t.Parallel()
	third := make(chan struct{})
	var missed, first atomic.Bool
	saving := func([]Outcome) {
		if !first.CompareAndSwap(false, true) {
			return
		}
		holdFor(third, &missed)
	}
	r := newDrain(t, 40, nil, saving)
	r.recv.AnswerFunc(func(n int) receiver.Behavior {
		if n == 21 {
			close(third)
		}
		return receiver.Behavior{}
	})
	require.NoError(t, r.run(t))
	require.False(t, missed.Load(), "the third batch was sent while the first's record was held")
	r.sentOnce(t, 40)
}

// TestRunClaimsFromTheFrontOnceItsBatchIsRecorded: after a short batch
// the run claims from the front of the queue, where that batch's
// deliveries stay due until their record commits; it waits for it, and
// sends each delivery once. The short batch's record is held until a
// claim from the front has read the queue (or overlapHold).
func TestRunClaimsFromTheFrontOnceItsBatchIsRecorded(t *testing.T) {
	t.Parallel()
	front := make(chan struct{})
	var once atomic.Bool
	claimed := func(req ClaimRequest) {
		if req.After == (Position{}) && once.CompareAndSwap(false, true) {
			close(front)
		}
	}
	saving := func(out []Outcome) {
		if len(out) == 5 {
			holdFor(front, nil)
		}
	}
	r := newDrain(t, 25, claimed, saving)
	require.NoError(t, r.run(t))
	r.sentOnce(t, 25)
}

// drain is an endpoint (max_in_flight 10) with a backlog, a receiver,
// and a worker under River whose unlocked claims and records go to the
// database through hooks.
type drain struct {
	f          storetest.Fixture
	endpointID uuid.UUID
	w          *Worker
	recv       *receiver.Receiver
	queue      *jobs.Queue
	done       chan error // each run's end
}

// newDrain makes n deliveries due to a new endpoint at a receiver. The
// worker calls claimed (if not nil) with each unlocked claim once it is
// read, and saving (if not nil) with each unlocked record's attempts
// before storing them.
func newDrain(t *testing.T, n int, claimed func(ClaimRequest), saving func([]Outcome)) drain {
	t.Helper()
	f := storetest.New(t)
	ctx := t.Context()
	recv := receiver.New(t)
	ep, err := f.Store.CreateEndpoint(ctx, f.TenantA.ID, sluice.EndpointSettings{URL: recv.URL(), MaxInFlight: 10}, storetest.Secret)
	require.NoError(t, err)
	storetest.DueBacklog(t, f.Store.Pool(), f.TenantA.ID, ep.ID, n)
	jobstest.DeleteAll(t, f.Store.Pool())

	workers := river.NewWorkers()
	client, err := river.NewClient(riverpgxv5.New(f.Store.Pool()), &river.Config{
		Workers: workers, FetchCooldown: 2 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
		Queues: map[string]river.QueueConfig{jobs.QueueDispatch: {MaxWorkers: 1}},
	})
	require.NoError(t, err)
	queue := jobs.NewQueue(client)
	w, err := NewWorker(f.Store, Config{
		Sender: send.New(send.Config{AllowPrivate: true}), DeliveryTimeout: 30 * time.Second, Budget: time.Minute,
		Nudger: NewNudger(f.Store, queue, NudgerConfig{}),
	})
	require.NoError(t, err)
	w.Close()
	w.claimer = newClaimer(func(ctx context.Context, reqs []ClaimRequest) ([]Claim, error) {
		out, err := w.db.ClaimUnlockedMany(ctx, reqs)
		for _, req := range reqs {
			if claimed != nil {
				claimed(req)
			}
		}
		return out, err
	}, 2)
	w.recorder = newRecorder(func(ctx context.Context, out []Outcome) error {
		if saving != nil {
			saving(out)
		}
		return w.db.RecordUnlocked(ctx, out)
	}, 2)
	d := drain{f: f, endpointID: ep.ID, w: w, recv: recv, queue: queue, done: make(chan error, 10)}
	river.AddWorker[jobs.DispatchArgs](workers, watchedWorker{Worker: w, done: d.done})
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
		w.Close()
	})
	return d
}

// watchedWorker is the worker, telling how each run ended.
type watchedWorker struct {
	*Worker
	done chan<- error
}

func (w watchedWorker) Work(ctx context.Context, job *river.Job[jobs.DispatchArgs]) error {
	err := w.Worker.Work(ctx, job)
	w.done <- err
	return err
}

// run queues the endpoint's dispatch and returns how its run ended.
func (d drain) run(t *testing.T) error {
	t.Helper()
	require.NoError(t, d.queue.DispatchNow(t.Context(), []uuid.UUID{d.endpointID}))
	select {
	case err := <-d.done:
		return err
	case <-t.Context().Done():
		t.Fatal("the run did not end")
		return nil
	}
}

// sentOnce checks that the receiver got n requests, each event once, and
// that every delivery is recorded delivered.
func (d drain) sentOnce(t *testing.T, n int) {
	t.Helper()
	seen := map[string]bool{}
	for _, req := range d.recv.Requests() {
		require.False(t, seen[req.ID], "event %s sent twice", req.ID)
		seen[req.ID] = true
	}
	require.Len(t, seen, n)
	var delivered int
	require.NoError(t, d.f.Store.Pool().QueryRow(t.Context(),
		`SELECT count(*) FROM deliveries WHERE endpoint_id = $1 AND status = 'delivered'`, d.endpointID).Scan(&delivered))
	require.Equal(t, n, delivered)
}

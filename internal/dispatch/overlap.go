package dispatch

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// A run draining a backlog on the unlocked path overlaps its steps: while
// a full batch is sent it claims the next (earlyClaim), and a batch's
// unlocked record commits while the run claims and sends the next
// (pendingRecord). Both rest on the claim's position (Position): a claim
// after a batch's last delivery cannot return any of the batch's, recorded
// or not.

// pendingRecord is the run's unlocked records committing while it goes
// on. They change nothing the run decides on (an unlocked record leaves
// the flow state as it was), so the run waits for them only before a step
// that could see their deliveries still due: a claim from the front of
// the queue (every FIFO claim is one), lingering, parking, finishing,
// yielding, a locked record, and its end.
type pendingRecord struct {
	done []chan error // oldest first
}

// maxPendingRecords bounds the records a run has committing at once: on a
// loaded database a record of a batch can take longer than sending the
// next, and two let one commit while the next is queued behind it (the
// recorder may commit both in one statement), without the run's records
// piling up behind a database slower than its sends.
const maxPendingRecords = 2

// start records in the background, once fewer than maxPendingRecords are
// under way; an error of one that was is returned instead.
func (p *pendingRecord) start(record func() error) error {
	for len(p.done) >= maxPendingRecords {
		if err := p.waitOldest(); err != nil {
			return err
		}
	}
	done := make(chan error, 1)
	p.done = append(p.done, done)
	go func() { done <- record() }()
	return nil
}

// wait returns once every record under way has committed, or with the
// first error.
func (p *pendingRecord) wait() error {
	for len(p.done) > 0 {
		if err := p.waitOldest(); err != nil {
			return err
		}
	}
	return nil
}

func (p *pendingRecord) waitOldest() error {
	err := <-p.done[0]
	p.done = p.done[1:]
	return err
}

// earlyClaim is the claim of the batch after the one being sent, read
// while it is sent: on the unlocked path, after that batch's last
// delivery. The run uses it only if, once the batch is recorded, it would
// claim the same way: from that position (every delivery sent), with the
// endpoint still known to need no lock (knownTarget.unlocked) and its flow
// state unchanged; otherwise it drops it, having locked and changed
// nothing.
type earlyClaim struct {
	after Position
	done  chan struct{}
	claim Claim
	err   error
}

// claimEarly starts claiming up to n of the endpoint's due deliveries after
// the batch being sent, if that batch is a full claim (a short one means
// the next claim starts from the front) on the unlocked path; nil if not.
func (w *Worker) claimEarly(ctx context.Context, endpointID uuid.UUID, plan claimPlan, claimed Claim, known knownTarget, reg *registration) *earlyClaim {
	n := len(claimed.Deliveries)
	if n == 0 || n != plan.n || claimed.Handed || !known.unlocked(w.cfg.Clock.Now()) {
		return nil
	}
	e := &earlyClaim{after: claimed.Deliveries[n-1].Position(), done: make(chan struct{})}
	go func() {
		defer close(e.done)
		w.cfg.Nudger.claiming(reg)
		e.claim, e.err = w.claimer.claimUnlocked(ctx, ClaimRequest{EndpointID: endpointID, N: n, After: e.after})
		w.cfg.Nudger.claimed(reg)
	}()
	return e
}

// take returns the early claim once it is read, if the run, claiming now
// after the position given, would make the same claim; ok false
// otherwise. A nil early claim is never taken.
func (e *earlyClaim) take(after Position, known knownTarget, now time.Time) (Claim, bool, error) {
	if e == nil {
		return Claim{}, false, nil
	}
	<-e.done
	if e.after != after || !known.unlocked(now) {
		return Claim{}, false, nil
	}
	return e.claim, true, e.err
}

// drop waits for an early claim the run will not use, so that its claim
// does not run on past the run.
func (e *earlyClaim) drop() {
	if e != nil {
		<-e.done
	}
}

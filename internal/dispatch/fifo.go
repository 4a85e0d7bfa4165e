package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// A FIFO endpoint (docs/architecture.md, "FIFO endpoints") sends each of
// its lines (its deliveries with one ordering_key) one delivery at a time,
// in the order of their positions (00030_fifo.sql). What keeps a second
// request of a line from being in flight, across worker processes and
// crashes:
//
//   - one run serves an endpoint at a time: River's unique dispatch job,
//     and the run's lease, which the sweeper checks before it replaces the
//     job of a run it finds dead, and which the run checks before each
//     claim;
//   - a run's loop is synchronous: claim, send all, record all, claim
//     again, so nothing a run claimed is in flight when it claims again;
//   - a claim takes only the head of a line (its queued delivery with the
//     lowest position), and only while it is due: a head waiting for its
//     retry blocks its line.
//
// A crash between a send and its record leaves the head queued: the next
// run sends it again, with the sequence number it was given, a duplicate
// the receiver can tell by webhook-id and webhook-sequence.

// fifoHead is the head of one of a FIFO endpoint's lines, as FIFOHeads
// reads it.
type fifoHead = dbq.FIFOHeadsRow

// unroutedWait is how long a run waits before it looks again at a line
// held up by an earlier event still waiting for its fan-out job: about as
// long as a fan-out job takes to run.
const unroutedWait = 50 * time.Millisecond

// chooseHeads chooses which of a FIFO endpoint's line heads (oldest
// position first) a claim takes: up to n that are due and not held up by
// an unrouted event, oldest position first. When it takes none it says
// when one will be due (nil: none is queued) and whether one is due but
// held up (wait unroutedWait then).
func chooseHeads(heads []fifoHead, n int) (chosen []fifoHead, nextDue *time.Time, heldUp bool) {
	for _, h := range heads {
		switch {
		case !h.Due:
			if nextDue == nil || h.NextAttemptAt.Before(*nextDue) {
				nextDue = &h.NextAttemptAt
			}
		case h.Unrouted:
			heldUp = true
		case len(chosen) < n:
			chosen = append(chosen, h)
		}
	}
	return chosen, nextDue, heldUp
}

// ClaimFIFO claims the heads of up to n of a FIFO endpoint's lines
// (chooseHeads), giving each its sequence number when it has none yet, in
// the step's transaction (ClaimFIFODeliveries). When it claims nothing,
// the claim's NextDue says when to look again: when the first head comes
// due, or after unroutedWait when a due head is held up by an unrouted
// event.
func (t *StepTx) ClaimFIFO(ctx context.Context, endpointID uuid.UUID, n int, now time.Time) (Claim, error) {
	heads, err := t.tx.Q.FIFOHeads(ctx, endpointID)
	if err != nil {
		return Claim{}, fmt.Errorf("read line heads: %w", err)
	}
	chosen, nextDue, heldUp := chooseHeads(heads, n)
	if len(chosen) == 0 {
		if heldUp {
			nextDue = new(now.Add(unroutedWait))
		}
		return Claim{NextDue: nextDue}, nil
	}
	p := dbq.ClaimFIFODeliveriesParams{
		EndpointID: endpointID, Ids: make([]uuid.UUID, len(chosen)), WeekLos: make([]uuid.UUID, len(chosen)),
		WeekHis: make([]uuid.UUID, len(chosen)), OrderingKeys: make([]string, len(chosen)), Fresh: make([]bool, len(chosen)),
	}
	position := make(map[uuid.UUID]int, len(chosen))
	for i, h := range chosen {
		p.Ids[i], p.OrderingKeys[i], p.Fresh[i] = h.ID, h.OrderingKey, h.FifoSequence == 0
		p.WeekLos[i], p.WeekHis[i] = store.WeekBounds(h.EventID)
		position[h.ID] = i
	}
	rows, err := t.tx.Q.ClaimFIFODeliveries(ctx, p)
	if err != nil {
		return Claim{}, fmt.Errorf("claim line heads: %w", err)
	}
	claimed := make([]Claimed, len(chosen))
	found := make([]bool, len(chosen))
	for _, r := range rows {
		i := position[r.ID]
		found[i] = true
		claimed[i] = Claimed{
			ID: r.ID, EventID: r.EventID, FailureCount: int(r.FailureCount), AttemptCount: int(r.AttemptCount),
			Replayed: r.Replayed, NextAttemptAt: *r.NextAttemptAt, EventType: r.Type, Payload: r.Payload,
			EventCreatedAt: r.EventCreatedAt, TraceContext: r.TraceContext, Sequence: r.FifoSequence,
		}
	}
	out := claimed[:0]
	for i := range claimed {
		if found[i] { // a head deleted meanwhile, with its endpoint, is not sent
			out = append(out, claimed[i])
		}
	}
	return Claim{Deliveries: out}, nil
}

// NextQueuedFIFO is NextQueued for a FIFO endpoint: only the heads of its
// lines can be sent, so whether one of them is due, and when the first
// comes due. A head held up by an unrouted event counts as due: the run
// goes on and waits for it (ClaimFIFO).
func (t *StepTx) NextQueuedFIFO(ctx context.Context, endpointID uuid.UUID) (next *time.Time, due bool, err error) {
	heads, err := t.tx.Q.FIFOHeads(ctx, endpointID)
	if err != nil {
		return nil, false, fmt.Errorf("read line heads: %w", err)
	}
	for _, h := range heads {
		due = due || h.Due
		if next == nil || h.NextAttemptAt.Before(*next) {
			next = &h.NextAttemptAt
		}
	}
	return next, due, nil
}

package dispatch

import (
	"context"
	"maps"
	"slices"

	"github.com/google/uuid"
)

// RecordSettings are the settings the unlocked record runs with.
var RecordSettings = recordSettings

// OutcomeIDs are the delivery ids of RecordOutcomes' arrays for outcomes,
// in the order they are sent, with each id's event beside it.
func OutcomeIDs(outcomes []Outcome) (ids, eventIDs []uuid.UUID) {
	p := outcomeParams(outcomes)
	return p.Ids, p.EventIds
}

// ReadAhead reads ahead for the batch after claimed, as a run does while it
// sends claimed, a claim of up to n; it waits for the reads and returns the
// events whose payloads the read ahead then holds (nil, and no read, when
// the run would not read ahead), and the read ahead's release.
func (w *Worker) ReadAhead(ctx context.Context, target Target, n int, claimed Claim) ([]uuid.UUID, func()) {
	a := w.readAheadFor(ctx, target, claimPlan{n: n}, claimed)
	if a == nil {
		return nil, func() {}
	}
	<-a.done
	return w.large.used(), a.release
}

// HeldPayloads is how many events' payloads the worker holds, used or kept.
func (w *Worker) HeldPayloads() int { return len(w.large.events()) }

// UsedPayloads is how many events' payloads a send or a read ahead uses.
func (w *Worker) UsedPayloads() int { return len(w.large.used()) }

// used are the events whose payloads a send or a read ahead uses.
func (s *sharedPayloads) used() []uuid.UUID {
	s.mu.Lock()
	defer s.mu.Unlock()
	var events []uuid.UUID
	for id, p := range s.m {
		if p.users > 0 {
			events = append(events, id)
		}
	}
	return events
}

// SendPayload is an event's large payload as one of its sends gets it,
// and the release to call once it is sent.
func (w *Worker) SendPayload(ctx context.Context, tenantID, eventID uuid.UUID) ([]byte, func(), error) {
	return w.largePayload(ctx, tenantID, eventID, true)
}

// events are the events whose payloads are held.
func (s *sharedPayloads) events() []uuid.UUID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.m))
}

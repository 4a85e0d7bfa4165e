package dispatch

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// A large payload (over 1 MiB: SLUICE_MAX_PAYLOAD raised past its default)
// is left out of claims (ClaimDueDeliveries) and read here instead, once
// for all the deliveries of its event that the worker has in flight at
// the same time, whichever endpoints they go to. It is held, opened, while
// any of them is being sent, and sent as it is between its body's head and
// tail (send.Message.Parts): a worker holds one copy of each large event it
// is sending, not one per delivery, and never a second one for the body.
// Small payloads come with their claim, as before, at no cost here.

// sharedPayloads are the large payloads of the deliveries in flight, by
// event.
type sharedPayloads struct {
	mu sync.Mutex
	m  map[uuid.UUID]*sharedPayload
}

// sharedPayload is one event's payload and the sends that use it.
type sharedPayload struct {
	users int           // under sharedPayloads.mu
	ready chan struct{} // closed once data or err is set
	data  []byte
	err   error
}

func newSharedPayloads() *sharedPayloads {
	return &sharedPayloads{m: map[uuid.UUID]*sharedPayload{}}
}

// get returns an event's payload: the one a send of the same event in
// flight holds, or else what read returns, shared with the sends that ask
// meanwhile. The caller calls release once it has sent it. If read fails
// for another send (its context ended, say), the waiting ones read again.
func (s *sharedPayloads) get(ctx context.Context, eventID uuid.UUID, read func(context.Context) ([]byte, error)) (data []byte, release func(), err error) {
	for {
		s.mu.Lock()
		p, reading := s.m[eventID], false
		if p == nil {
			p, reading = &sharedPayload{ready: make(chan struct{})}, true
			s.m[eventID] = p
		}
		p.users++
		s.mu.Unlock()
		release = func() { s.release(eventID, p) }

		if reading {
			p.data, p.err = read(ctx)
			if p.err != nil {
				s.forget(eventID, p) // the next send reads it again
			}
			close(p.ready)
		} else {
			select {
			case <-p.ready:
			case <-ctx.Done():
				release()
				return nil, nil, fmt.Errorf("wait for the payload: %w", ctx.Err())
			}
		}
		if p.err == nil {
			return p.data, release, nil
		}
		release()
		if reading || ctx.Err() != nil {
			return nil, nil, p.err
		}
	}
}

// release ends one send's use of p: the last one lets it go.
func (s *sharedPayloads) release(eventID uuid.UUID, p *sharedPayload) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.users--; p.users == 0 && s.m[eventID] == p {
		delete(s.m, eventID)
	}
}

// forget drops p, whose read failed, so that no send waits for it again.
func (s *sharedPayloads) forget(eventID uuid.UUID, p *sharedPayload) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[eventID] == p {
		delete(s.m, eventID)
	}
}

// readPayload reads a large event's payload, opened.
func (w *Worker) readPayload(ctx context.Context, tenantID, eventID uuid.UUID) ([]byte, error) {
	stored, err := store.Read(ctx, w.db.st, (*dbq.Queries).EventPayload, eventID)
	if err != nil {
		return nil, fmt.Errorf("read payload: %w", err)
	}
	payload, err := w.payloads.OpenJSON(ctx, tenantID, stored)
	if err != nil {
		return nil, fmt.Errorf("open sealed payload: %w", err)
	}
	return payload, nil
}

package dispatch

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
)

// A large payload is read once for the sends of its event in flight, and
// kept once the last of them is done while sends of the event are still to
// come (its other endpoints' runs, which seldom send it at the same moment)
// for a short while (keepFor), within a budget (keepBytes) of payloads no
// send uses: the runs of one event's endpoints read it once between them
// instead of once each. One that has no send to come is let go of at once.

const (
	keepBytes = 64 << 20        // of payloads no send uses, at most
	keepFor   = 5 * time.Second // the longest one is kept unused
)

// sharedPayloads are the large payloads of the deliveries in flight, and
// those kept for the sends to come, by event.
type sharedPayloads struct {
	mu      sync.Mutex
	m       map[uuid.UUID]*sharedPayload
	keep    int              // bytes of kept payloads, at most
	keepFor time.Duration    // the longest one is kept
	kept    int              // bytes of kept payloads now
	idle    []*sharedPayload // the kept payloads, oldest first
}

// sharedPayload is one event's payload and the sends that use it.
type sharedPayload struct {
	eventID uuid.UUID
	users   int           // under sharedPayloads.mu, as are sends, idle, timer
	sends   int           // the event's sends still to come, as read
	idle    bool          // kept, with no user
	timer   *time.Timer   // lets it go when kept keepFor
	ready   chan struct{} // closed once data or err is set
	data    []byte
	err     error
}

// A payloadRead reads an event's payload, and how many of its sends are
// still to come (counting those in flight).
type payloadRead func(context.Context) (data []byte, sends int, err error)

// newSharedPayloads keeps up to keep bytes of payloads no send uses.
func newSharedPayloads(keep int) *sharedPayloads {
	return &sharedPayloads{m: map[uuid.UUID]*sharedPayload{}, keep: keep, keepFor: keepFor}
}

// get returns an event's payload: the one a send of the same event in
// flight holds or that is kept, or else what read returns, shared with the
// sends that ask meanwhile. The caller calls release once it is done with
// it; send says whether it sends it (a send to come less) or reads it ahead.
// If read fails for another send (its context ended, say), the waiting ones
// read again.
func (s *sharedPayloads) get(ctx context.Context, eventID uuid.UUID, send bool, read payloadRead) (data []byte, release func(), err error) {
	for {
		p, reading := s.use(eventID)
		release = func() { s.release(p, send) }
		if reading {
			var sends int
			p.data, sends, p.err = read(ctx)
			s.mu.Lock()
			p.sends += sends
			s.mu.Unlock()
			if p.err != nil {
				s.forget(p) // the next send reads it again
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

// use counts a user of an event's payload, held or kept, or of a new one
// that the caller is to read (reading).
func (s *sharedPayloads) use(eventID uuid.UUID) (p *sharedPayload, reading bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p = s.m[eventID]
	if p == nil {
		p, reading = &sharedPayload{eventID: eventID, ready: make(chan struct{})}, true
		s.m[eventID] = p
	}
	if p.idle {
		s.unkeep(p)
	}
	p.users++
	return p, reading
}

// release ends one use of p: the last one keeps it if sends of its event
// are to come and it fits, and lets it go otherwise.
func (s *sharedPayloads) release(p *sharedPayload, send bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if send {
		p.sends--
	}
	if p.users--; p.users > 0 || s.m[p.eventID] != p {
		return
	}
	if p.err != nil || p.sends <= 0 || len(p.data) > s.keep {
		delete(s.m, p.eventID)
		return
	}
	p.idle, s.kept = true, s.kept+len(p.data)
	s.idle = append(s.idle, p)
	var timer *time.Timer // set under mu, as expire reads it
	timer = time.AfterFunc(s.keepFor, func() { s.expire(p, &timer) })
	p.timer = timer
	for s.kept > s.keep {
		s.drop(s.idle[0])
	}
}

// unkeep takes p, kept, back into use. Under mu.
func (s *sharedPayloads) unkeep(p *sharedPayload) {
	p.timer.Stop()
	p.idle, s.kept = false, s.kept-len(p.data)
	s.idle = slices.DeleteFunc(s.idle, func(q *sharedPayload) bool { return q == p })
}

// drop lets p, kept, go. Under mu.
func (s *sharedPayloads) drop(p *sharedPayload) {
	s.unkeep(p)
	delete(s.m, p.eventID)
}

// expire lets p go if it is still kept, unused, since timer was set.
func (s *sharedPayloads) expire(p *sharedPayload, timer **time.Timer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.idle && p.timer == *timer && s.m[p.eventID] == p {
		s.drop(p)
	}
}

// forget drops p, whose read failed, so that no send waits for it again.
func (s *sharedPayloads) forget(p *sharedPayload) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[p.eventID] == p {
		delete(s.m, p.eventID)
	}
}

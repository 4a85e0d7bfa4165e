package store

import (
	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Touched is what a post did to its endpoints' queues: for each endpoint
// whose queue changed, the deliveries the post made there as a claim would
// return them, or nil when the post does not know them whole (a fan-out job
// makes them later, or a coalesce key may have updated a queued one
// instead).
type Touched map[uuid.UUID][]Claimed

// Endpoints lists the endpoints whose queues changed.
func (t Touched) Endpoints() []uuid.UUID {
	ids := make([]uuid.UUID, 0, len(t))
	for id := range t {
		ids = append(ids, id)
	}
	return ids
}

// TouchedWithout is Touched for endpoints whose new deliveries are not
// known whole.
func TouchedWithout(endpointIDs []uuid.UUID) Touched {
	t := make(Touched, len(endpointIDs))
	for _, id := range endpointIDs {
		t[id] = nil
	}
	return t
}

// touchedWith is Touched for the deliveries InsertRoutedEvents made of evs:
// each new, due when it was made, with its event as stored.
func touchedWith(evs []sluice.Event, rows []dbq.InsertRoutedEventsRow) Touched {
	byID := make(map[uuid.UUID]*sluice.Event, len(evs))
	for i := range evs {
		byID[evs[i].ID] = &evs[i]
	}
	t := Touched{}
	for _, r := range rows {
		ev := byID[r.EventID]
		if ev == nil || r.NextAttemptAt == nil { // neither happens; a claim will find it
			t[r.EndpointID] = nil
			continue
		}
		if c, known := t[r.EndpointID]; known && c == nil {
			continue
		}
		t[r.EndpointID] = append(t[r.EndpointID], Claimed{
			ID: r.ID, EventID: r.EventID, NextAttemptAt: *r.NextAttemptAt,
			EventType: ev.Type, Payload: ev.Payload, EventCreatedAt: ev.CreatedAt,
		})
	}
	return t
}

// claimedOverhead is about what a Claimed holds besides its payload and type.
const claimedOverhead = 128

// ClaimedBytes is about how much memory deliveries hold, payloads included.
func ClaimedBytes(ds []Claimed) int {
	n := 0
	for _, d := range ds {
		n += claimedOverhead + len(d.Payload) + len(d.EventType)
	}
	return n
}

// Bytes is about how much memory the deliveries in t hold.
func (t Touched) Bytes() int {
	n := 0
	for _, ds := range t {
		n += ClaimedBytes(ds)
	}
	return n
}

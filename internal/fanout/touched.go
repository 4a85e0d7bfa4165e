package fanout

import (
	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/dispatch"
)

// Touched is what a post did to its endpoints' queues: for each endpoint
// whose queue changed, the deliveries the post made there as a claim would
// return them, or nil when the post does not know them whole (a fan-out job
// makes them later, or a coalesce key may have updated a queued one
// instead).
type Touched map[uuid.UUID][]dispatch.Claimed

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

// claimedOverhead is about what a Claimed holds besides its payload and type.
const claimedOverhead = 128

// ClaimedBytes is about how much memory deliveries hold, payloads included.
func ClaimedBytes(ds []dispatch.Claimed) int {
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

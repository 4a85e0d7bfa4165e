package dispatch

import (
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/metrics"
)

// Made is the deliveries a commit made, by endpoint. An endpoint's entry
// holds them as a claim would return them, when the commit knows them all
// (the one-statement insert, fanout.Insert), and is nil when it knows only
// that some were made. Ingest hands them to the runs registered in its
// process (Nudger.Hand), which then send them without claiming: at a
// trickle, a claim per delivery saved.
type Made map[uuid.UUID][]Claimed

// registration is a run's place in the Nudger while it works.
//
// A hand-off must never give a run a delivery a claim of that run already
// returned. Nudger.seq counts the claims completed by registered runs; a
// hand-off carries seq as read before its deliveries were inserted (Seq),
// and a run takes it only if its own last claim completed no later than
// that read. A claim that could have seen the deliveries took its snapshot
// after their commit, which came after the read, so it completed after the
// read too, and its run refuses the hand-off and claims instead.
//
// A handed delivery stays queued in the database until its attempt is
// recorded, so a hand-off a run refuses costs nothing but the claim it
// makes anyway.
type registration struct {
	wakes chan struct{} // holds a wake not yet taken

	// Under Nudger.mu:
	claimed     uint64    // Nudger.seq when the run's last claim completed
	handed      []Claimed // deliveries handed since, all usable
	handedBytes int
	unknown     bool // woken without deliveries, or with some unusable: the run must claim
}

// maxHandedBytes bounds the payloads held for one run: a run busy with a
// slow receiver while posts pour in claims them later instead of holding
// them all in memory.
const maxHandedBytes = 1 << 20

// Seq is the count of claims completed by runs registered here, to read
// before inserting deliveries that will be handed over (Hand).
func (n *Nudger) Seq() uint64 { return n.seq.Load() }

// Hand wakes the runs registered here of the endpoints given deliveries,
// handing each the deliveries made for it, which were inserted after seq
// was read (Seq), and returns the other endpoints: those the caller
// nudges (Nudge), which also wakes poll reads. A poll endpoint, having no
// dispatch run, is always among them.
func (n *Nudger) Hand(seq uint64, made Made) []uuid.UUID {
	var rest []uuid.UUID
	n.mu.Lock()
	defer n.mu.Unlock()
	for id, claimed := range made {
		if !n.wakeLocked(id, seq, claimed) {
			rest = append(rest, id)
		}
	}
	return rest
}

// hand adds to r what a wake brought: deliveries made after seq (nil: not
// known). Under mu.
func (r *registration) hand(seq uint64, made []Claimed) {
	size := 0
	for _, c := range made {
		size += len(c.Payload)
	}
	switch {
	case made == nil || seq < r.claimed || r.handedBytes+size > maxHandedBytes:
		r.unknown = true
		r.handed, r.handedBytes = nil, 0
	case !r.unknown:
		r.handed = append(r.handed, made...)
		r.handedBytes += size
	}
}

// claiming notes that r's run is about to claim: the claim sees every
// delivery handed so far, so those hand-offs are spent.
func (n *Nudger) claiming(r *registration) {
	if r == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	r.handed, r.handedBytes, r.unknown = nil, 0, false
}

// claimed notes that r's run completed a claim: from now on it takes only
// hand-offs read after it. Deliveries handed while the claim ran may be
// among those it returned, and wakes without deliveries may have come after
// it looked: either way the run must claim again.
func (n *Nudger) claimed(r *registration) {
	if r == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	r.claimed = n.seq.Add(1)
	if len(r.handed) > 0 {
		r.handed, r.handedBytes, r.unknown = nil, 0, true
	}
}

// take returns the deliveries handed to r's run since its last claim, when
// they are all its wakes brought; otherwise nil, and the run must claim.
func (n *Nudger) take(r *registration) []Claimed {
	if r == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	handed := r.handed
	r.handed, r.handedBytes = nil, 0
	if r.unknown {
		return nil
	}
	return handed
}

// The batch counters, resolved once rather than on every batch.
var (
	handedBatches  = metrics.DispatchBatches.WithLabelValues("handed")
	claimedBatches = metrics.DispatchBatches.WithLabelValues("claimed")
)

// batchCounter counts a batch the run was handed, or else claimed.
func batchCounter(handed bool) prometheus.Counter {
	if handed {
		return handedBatches
	}
	return claimedBatches
}

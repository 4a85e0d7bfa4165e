package dispatch

import "github.com/google/uuid"

// RecordSettings are the settings the unlocked record runs with.
var RecordSettings = recordSettings

// OutcomeIDs are the delivery ids of RecordOutcomes' arrays for outcomes,
// in the order they are sent, with each id's event beside it.
func OutcomeIDs(outcomes []Outcome) (ids, eventIDs []uuid.UUID) {
	p := outcomeParams(outcomes)
	return p.Ids, p.EventIds
}

package dispatch_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dispatch"
)

// TestRecordsGoInDeliveryOrder: a group commit's outcomes arrive one run's
// batch after another's; RecordOutcomes gets them in delivery id order (the
// order the deliveries lie on disk), each with its own event.
func TestRecordsGoInDeliveryOrder(t *testing.T) {
	t.Parallel()
	var outcomes []dispatch.Outcome
	events := map[uuid.UUID]uuid.UUID{}
	for range 50 {
		id, ev := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
		events[id] = ev
		outcomes = append(outcomes, dispatch.Outcome{DeliveryID: id, EventID: ev, Status: "delivered"})
	}
	slices.Reverse(outcomes) // a later run's batch first
	arrived := slices.Clone(outcomes)

	ids, eventIDs := dispatch.OutcomeIDs(outcomes)
	require.True(t, slices.IsSortedFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }),
		"delivery ids in order")
	require.Len(t, ids, len(outcomes))
	for i, id := range ids {
		require.Equal(t, events[id], eventIDs[i], "each delivery beside its own event")
	}
	require.Equal(t, arrived, outcomes, "the caller's slice is left as it was")
}

package ingest

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/store"
)

// TestHandoffHoldsBoundedPayloads: commits that land while a pass is slow
// are kept with their deliveries up to maxPendingBytes, and past that as
// endpoints alone, so their payloads are not held.
func TestHandoffHoldsBoundedPayloads(t *testing.T) {
	h := &handoff{kick: make(chan struct{}, 1)}
	big := func() store.Touched {
		return store.Touched{uuid.New(): {{ID: uuid.New(), Payload: make([]byte, maxPendingBytes/3)}}}
	}
	for range 4 {
		h.add(1, big())
	}
	require.Len(t, h.pending, 4)
	for i, c := range h.pending {
		for _, ds := range c.touched {
			require.Equal(t, i < 2, ds != nil, "commit %d keeps its deliveries only within the bound", i)
		}
	}
	require.LessOrEqual(t, h.pendingBytes, maxPendingBytes)
}

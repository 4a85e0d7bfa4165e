package store

import (
	"github.com/sluice-dev/sluice/internal/flow"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// EndpointAdaptive is an endpoint row's adaptive rate state, for the
// endpoint view's effective rate (endpointFromRow).
func EndpointAdaptive(e dbq.Endpoint) flow.Adaptive {
	return flow.AdaptiveOf(e.AdaptiveRate, e.AdaptiveRateAt, e.AdaptiveHalvedAt)
}

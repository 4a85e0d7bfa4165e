package app_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// An endpoint with verification "challenge" gets nothing but signed
// challenges until its receiver answers one; its deliveries queue
// meanwhile (none lost) and go once it does. A new URL is proved again.
func TestEndpointVerification(t *testing.T) {
	h := start(t, nil)
	rcv := receiver.New(t)
	rcv.Answer(receiver.Behavior{Body: "ok"}) // 2xx, but no echo
	id, _ := h.endpoint(rcv, []string{"*"}, map[string]any{"verification": "challenge"})
	for i := range 3 {
		h.post("order.created", map[string]int{"n": i})
	}

	var ep struct {
		Status            string  `json:"status"`
		VerifiedAt        *string `json:"verified_at"`
		VerificationError *string `json:"verification_error"`
	}
	eventually(t, 20*time.Second, func() bool {
		h.call(http.MethodGet, "/v1/endpoints/"+id, nil, http.StatusOK, &ep)
		return ep.VerificationError != nil
	}, "the unanswered challenge recorded")
	require.Equal(t, "unverified", ep.Status)
	require.Contains(t, *ep.VerificationError, `{"challenge"`)
	for _, req := range rcv.Requests() {
		require.Equal(t, "sluice.endpoint.verification", eventType(t, req.Body), "nothing but challenges before an answer")
		require.True(t, req.Verified, "a challenge is signed with the endpoint's secret")
	}
	require.Len(t, h.deliveries("status=pending&endpoint_id="+id), 3, "the deliveries wait")

	// Asked again, the receiver answers: verified, and the deliveries go.
	rcv.Answer(receiver.Behavior{Challenge: true})
	h.call(http.MethodPost, "/v1/endpoints/"+id+"/verify", nil, http.StatusAccepted, nil)
	eventually(t, 20*time.Second, func() bool { return len(h.deliveries("status=delivered&endpoint_id="+id)) == 3 }, "delivered once verified")
	h.call(http.MethodGet, "/v1/endpoints/"+id, nil, http.StatusOK, &ep)
	require.Equal(t, "active", ep.Status)
	require.NotNil(t, ep.VerifiedAt)
	require.Nil(t, ep.VerificationError)

	// A new URL must be proved: unverified until its receiver answers.
	other := receiver.New(t)
	h.call(http.MethodPatch, "/v1/endpoints/"+id, map[string]any{"url": other.URL()}, http.StatusOK, &ep)
	require.Equal(t, "unverified", ep.Status)
	require.Nil(t, ep.VerifiedAt)
}

// eventType is the type of a delivery's body.
func eventType(t *testing.T, body []byte) string {
	t.Helper()
	var ev struct{ Type string }
	require.NoError(t, json.Unmarshal(body, &ev))
	return ev.Type
}

package dispatch

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testkit/fakeclock"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// TestUnitSendRetryAt: the retries a batch schedules count from the
// worker's clock (in 2030 here), not the system's, against a local receiver
// that answers at once.
func TestUnitSendRetryAt(t *testing.T) {
	t.Parallel()
	receiver := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/busy":
			rw.Header().Set("Retry-After", "7200")
			rw.WriteHeader(http.StatusServiceUnavailable)
		case "/fail":
			rw.WriteHeader(http.StatusInternalServerError)
		default:
			rw.WriteHeader(http.StatusNoContent)
		}
	}))
	defer receiver.Close()
	w := &Worker{cfg: Config{
		Sender: send.New(send.Config{Timeout: time.Minute, AllowPrivate: true}),
		Retry:  Retry{Schedule: []time.Duration{time.Hour}},
		Clock:  fakeclock.New(clock),
	}}
	// AttemptCount 1 (an earlier 429) keeps the first-attempt lag metric,
	// which compares the system's time with EventCreatedAt, out of it.
	attemptTo := func(path string) Outcome {
		// A batch's payloads are let go of as it is sent: a new one each time.
		claimed := []Claimed{{ID: uuid.New(), EventID: uuid.New(), AttemptCount: 1, EventType: "a.b", Payload: []byte(`{}`)}}
		sent := w.sendBatch(t.Context(), Target{URL: receiver.URL + path}, claimed)
		require.Len(t, sent, 1)
		return sent[0].outcome
	}

	o := attemptTo("/fail")
	require.Equal(t, sluice.DeliveryFailed, o.Status)
	require.False(t, o.NextAttemptAt.Before(clock.Add(48*time.Minute)), "an hour from the clock's now, less a fifth: %s", o.NextAttemptAt)
	require.False(t, o.NextAttemptAt.After(clock.Add(72*time.Minute)), "plus a fifth: %s", o.NextAttemptAt)

	o = attemptTo("/busy")
	require.Equal(t, clock.Add(2*time.Hour), o.NextAttemptAt, "a 503's Retry-After from the clock's now")

	o = attemptTo("/ok")
	require.Equal(t, sluice.DeliveryDelivered, o.Status)
	require.True(t, o.NextAttemptAt.IsZero())
}

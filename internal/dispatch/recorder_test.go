package dispatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestRecorderRejectedAttemptFailsAlone records, through one committer so
// that they share statements, the attempts of many runs of one tenant's
// endpoint together with attempts of another tenant's endpoint whose error
// text Postgres rejects (a NUL byte: the sender cleans response bodies but
// passes short transport errors through, and a TLS certificate's names may
// carry one). The good attempts must all be stored; each rejected run must
// fail alone, with an error sluice.RowRejected recognises.
func TestRecorderRejectedAttemptFailsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := storetest.New(t)
	good := newDeliveries(t, f, f.TenantA.ID, 60)
	bad := newDeliveries(t, f, f.TenantB.ID, 6)
	r := newRecorder(NewDB(f.Store).RecordUnlocked, 1)
	defer r.close()

	var wg sync.WaitGroup
	for i, d := range good {
		wg.Go(func() {
			require.NoError(t, r.record(ctx, []Outcome{outcomeFor(d, nil)}))
		})
		if i%(len(good)/len(bad)) == 0 {
			b := bad[i/(len(good)/len(bad))]
			wg.Go(func() {
				err := r.record(ctx, []Outcome{outcomeFor(b, new("x509: certificate is valid for a\x00b"))})
				require.Error(t, err)
				require.True(t, sluice.RowRejected(err), "a rejected row is recognisable: %v", err)
			})
		}
	}
	wg.Wait()

	for _, d := range good {
		require.Equal(t, 1, attempts(t, f, d.ID), "every good attempt is stored")
	}
	for _, d := range bad {
		require.Zero(t, attempts(t, f, d.ID))
	}
}

// newDeliveries creates n deliveries to a new endpoint of tenant's.
func newDeliveries(t *testing.T, f storetest.Fixture, tenant uuid.UUID, n int) []sluice.Delivery {
	t.Helper()
	ctx := context.Background()
	ep, err := f.Store.CreateEndpoint(ctx, tenant, sluice.EndpointSettings{URL: "https://hooks.example/x", MaxInFlight: 10}, storetest.Secret)
	require.NoError(t, err)
	storetest.DueBacklog(t, f.Store.Pool(), tenant, ep.ID, n)
	page, err := f.Store.ListDeliveries(ctx, tenant, sluice.DeliveryFilter{EndpointID: &ep.ID}, sluice.PageParams{Limit: n})
	require.NoError(t, err)
	require.Len(t, page.Items, n)
	return page.Items
}

// outcomeFor is a delivered attempt of d, or a failed one with errText.
func outcomeFor(d sluice.Delivery, errText *string) Outcome {
	o := Outcome{DeliveryID: d.ID, EventID: d.EventID, Status: sluice.DeliveryDelivered,
		At: time.Now(), StatusCode: 200, LatencyMS: 3}
	if errText != nil {
		o.Status, o.Failed, o.NextAttemptAt = sluice.DeliveryFailed, true, time.Now().Add(time.Minute)
		o.StatusCode, o.Error = 0, *errText
	}
	return o
}

// attempts is how many attempts of delivery id are stored.
func attempts(t *testing.T, f storetest.Fixture, id uuid.UUID) int {
	t.Helper()
	var n int
	require.NoError(t, f.Store.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM delivery_attempts WHERE delivery_id = $1`, id).Scan(&n))
	return n
}

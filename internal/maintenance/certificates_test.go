package maintenance

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// An endpoint whose client certificate expires within 14 days emits
// sluice.endpoint.certificate_expiring once, with an email to its owner;
// a new certificate is watched afresh. One expiring later, and one
// without a certificate, emit nothing.
func TestCertificateExpiring(t *testing.T) {
	b := setupSweep(t)
	b.sweeper = b.newSweeper(SweeperConfig{Interval: time.Nanosecond, WalkInterval: time.Nanosecond, CertificateInterval: time.Nanosecond})
	withTLS := func(notAfter time.Time) uuid.UUID {
		set := sluice.EndpointSettings{URL: "https://127.0.0.1:9/", MaxInFlight: 1}
		set.Options.TLS = &sluice.TLSOption{ClientCertificate: "PEM", Subject: "CN=a", NotAfter: notAfter}
		ep, err := b.f.Store.CreateEndpoint(b.ctx, b.f.TenantA.ID, set, storetest.Secret)
		require.NoError(t, err)
		require.NoError(t, b.f.Store.SetEndpointTLSKey(b.ctx, b.f.TenantA.ID, ep.ID, []byte("KEY")))
		return ep.ID
	}
	soon := time.Now().Add(10 * 24 * time.Hour).UTC().Truncate(time.Second)
	expiring := withTLS(soon)
	later := withTLS(time.Now().Add(30 * 24 * time.Hour))

	b.sweep()
	b.sweep()
	evs := b.certificateEvents()
	require.Len(t, evs, 1, "once, however many sweeps")
	require.Equal(t, expiring, evs[0].EndpointID)
	require.Equal(t, "CN=a", evs[0].CertificateSubject)
	require.True(t, soon.Equal(*evs[0].NotAfter))
	require.Equal(t, 1, b.alerts(expiring), "the owner is emailed")
	require.Zero(t, b.alerts(later))

	// A renewed certificate (expiring soon too) is announced again.
	ep, err := b.f.Store.GetEndpoint(b.ctx, b.f.TenantA.ID, expiring)
	require.NoError(t, err)
	set := ep.Settings()
	renewed := *set.Options.TLS
	renewed.NotAfter = soon.Add(time.Hour)
	set.Options.TLS = &renewed
	_, err = b.f.Store.UpdateEndpoint(b.ctx, b.f.TenantA.ID, expiring, set, false)
	require.NoError(t, err)
	b.sweep()
	b.sweep()
	require.Len(t, b.certificateEvents(), 2)
	require.Equal(t, 2, b.alerts(expiring))
}

// certificateEvents are the payloads of the tenant's
// sluice.endpoint.certificate_expiring events.
func (b *sweepBundle) certificateEvents() []sluice.OpPayload {
	b.t.Helper()
	page, err := b.f.Store.ListEvents(b.ctx, b.f.TenantA.ID, nil, nil, sluice.PageParams{Limit: sluice.MaxPageLimit})
	require.NoError(b.t, err)
	var out []sluice.OpPayload
	for _, ev := range page.Items {
		if ev.Type == sluice.OpCertificateExpiring {
			var p sluice.OpPayload
			require.NoError(b.t, json.Unmarshal(ev.Payload, &p))
			require.Equal(b.t, sluice.ReasonExpiring, p.Reason)
			out = append(out, p)
		}
	}
	return out
}

// alerts counts the emails queued about an endpoint's certificate.
func (b *sweepBundle) alerts(endpointID uuid.UUID) int {
	b.t.Helper()
	var n int
	require.NoError(b.t, b.f.Store.Pool().QueryRow(b.ctx,
		`SELECT count(*) FROM alerts WHERE endpoint_id = $1 AND event_type = $2`, endpointID, sluice.OpCertificateExpiring).Scan(&n))
	return n
}

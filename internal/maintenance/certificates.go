package maintenance

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/notify"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// certificatePage is how many endpoints one transaction of the
// certificate check tells about.
const certificatePage = 100

// checkCertificates, run on the sweep's certificates turn (once per
// CertificateInterval across workers), tells the owner of every endpoint
// whose client certificate (its tls option) expires within
// sluice.CertificateExpiringWithin, or has expired, once per certificate:
// sluice.endpoint.certificate_expiring and its email. Its cost is a read
// of the endpoints with a tls option alone.
func (s *Sweeper) checkCertificates(ctx context.Context) error {
	for {
		n, err := s.noticeCertificates(ctx)
		if err != nil || n < certificatePage {
			return err
		}
	}
}

// noticeCertificates tells about up to certificatePage endpoints in one
// transaction: each marked told of its certificate, its event posted and
// its email queued (notify.PostOpEvents). It reports how many.
func (s *Sweeper) noticeCertificates(ctx context.Context) (int, error) {
	var rows []dbq.NoticeCertificatesExpiringRow
	err := s.store.InTx(ctx, func(tx store.Tx) error {
		now := s.cfg.Clock.Now()
		var err error
		rows, err = tx.Q.NoticeCertificatesExpiring(ctx, dbq.NoticeCertificatesExpiringParams{
			Before: now.Add(sluice.CertificateExpiringWithin), MaxRows: certificatePage,
		})
		if err != nil {
			return fmt.Errorf("mark certificates expiring: %w", err)
		}
		byTenant := map[uuid.UUID][]sluice.OpEvent{}
		for _, r := range rows {
			ev := sluice.OpEndpoint{ID: r.ID, URL: r.Url, Consumer: r.Consumer}.Event(sluice.OpCertificateExpiring, sluice.ReasonExpiring)
			ev.Payload.CertificateSubject, ev.Payload.NotAfter = r.Subject, new(r.NotAfter.UTC())
			byTenant[r.TenantID] = append(byTenant[r.TenantID], ev)
		}
		for tenantID, evs := range byTenant {
			if err := notify.PostOpEvents(ctx, tx, s.cfg.Nudger, now, tenantID, evs); err != nil {
				return fmt.Errorf("post certificate events: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, r := range rows {
		s.cfg.Logger.Warn("endpoint client certificate expiring", "endpoint_id", r.ID, "not_after", r.NotAfter)
	}
	return len(rows), nil
}

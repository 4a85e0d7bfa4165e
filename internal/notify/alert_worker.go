// AlertWorker is the River worker that emails an endpoint's owner when its
// circuit opens or closes, Sluice disables it, or its backlog reaches its
// backlog alert. The transition and this job commit together, the email is
// sent once per transition (the alert row is marked sent in the
// transaction that completes the job), and a mail server that is down is
// retried by River without ever blocking delivery.

package notify

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// AlertWorker runs jobs.AlertArgs.
type AlertWorker struct {
	river.WorkerDefaults[jobs.AlertArgs]
	store     *store.Store
	mailer    *Mailer
	publicURL string
}

// NewAlertWorker returns an alert worker sending with mailer; links point under
// publicURL.
func NewAlertWorker(st *store.Store, mailer *Mailer, publicURL string) *AlertWorker {
	return &AlertWorker{store: st, mailer: mailer, publicURL: publicURL}
}

// Work sends the alert's email unless it was sent already.
func (w *AlertWorker) Work(ctx context.Context, job *river.Job[jobs.AlertArgs]) error {
	a, err := w.store.GetCircuitAlert(ctx, job.Args.AlertID)
	if errors.Is(err, sluice.ErrNotFound) || (err == nil && a.Sent) {
		return nil // endpoint deleted since, or already sent
	}
	if err != nil {
		return err
	}
	if !w.mailer.Enabled() {
		return river.JobCancel(errors.New("SLUICE_SMTP_URL is not set: alert not emailed"))
	}
	msg := w.message(a)
	if err := w.mailer.Send(ctx, msg); err != nil {
		return err
	}
	return w.store.MarkCircuitAlertSent(ctx, a.ID, func(ctx context.Context, tx pgx.Tx) error {
		return jobs.Complete(ctx, tx, job)
	})
}

// message is an alert's email: a circuit opening or closing, or the
// endpoint disabled.
func (w *AlertWorker) message(a store.CircuitAlert) Message {
	dashboard := w.publicURL + "/endpoints/" + a.EndpointID.String()
	messageID := "<alert-" + a.ID.String() + "@sluice>"
	switch a.Kind {
	case "backlog":
		var p sluice.OpPayload
		_ = json.Unmarshal(a.Payload, &p) // written by store.RaiseBacklogAlert; the URL and id are the row's anyway
		p.EndpointID, p.URL = a.EndpointID, a.EndpointURL
		return BacklogAlert{Payload: p, TenantName: a.TenantName, At: a.CreatedAt, DashboardURL: dashboard}.Message(a.AlertEmail, messageID)
	case "disabled":
		return DisabledAlert{
			Reason: a.Reason, TenantName: a.TenantName, EndpointID: a.EndpointID.String(), EndpointURL: a.EndpointURL,
			LastError: a.LastError, At: a.CreatedAt, DashboardURL: dashboard,
		}.Message(a.AlertEmail, messageID)
	}
	return CircuitAlert{
		Opened:       a.Opened,
		TenantName:   a.TenantName,
		EndpointID:   a.EndpointID.String(),
		EndpointURL:  a.EndpointURL,
		LastError:    a.LastError,
		Failures:     a.Failures,
		At:           a.CreatedAt,
		NextProbeAt:  a.NextProbeAt,
		DashboardURL: dashboard,
	}.Message(a.AlertEmail, messageID)
}

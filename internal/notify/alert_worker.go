// AlertWorker is the River worker that emails an endpoint's owner about an
// operational event: its circuit opening or closing, Sluice disabling it,
// its backlog. The event and this job commit together
// (PostOpEvents), the email is sent once per event (the alert row is marked sent in the
// transaction that completes the job), and a mail server that is down is
// retried by River without ever blocking delivery.

package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
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
	var a dbq.GetAlertRow
	err := w.store.InTx(ctx, func(tx store.Tx) error {
		var err error
		a, err = tx.Q.GetAlert(ctx, job.Args.AlertID)
		if err != nil {
			return fmt.Errorf("get alert: %w", err)
		}
		return nil
	})
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && a.SentAt != nil) {
		return nil // endpoint deleted since, or already sent
	}
	if err != nil {
		return fmt.Errorf("read alert: %w", err)
	}
	if !w.mailer.Enabled() {
		return river.JobCancel(errors.New("SLUICE_SMTP_URL is not set: alert not emailed")) //nolint:wrapcheck // River reads the cancel from the error it is given
	}
	msg, err := w.message(ctx, a)
	if err != nil {
		return river.JobCancel(err) //nolint:wrapcheck // River reads the cancel from the error it is given; a payload no retry will mend
	}
	if err := w.mailer.Send(ctx, msg); err != nil {
		return err
	}
	// Marked sent in the transaction that completes the job: the email
	// is not sent again unless the mark is lost with the completion.
	return w.store.InTx(ctx, func(tx store.Tx) error {
		if err := tx.Q.MarkAlertSent(ctx, a.ID); err != nil {
			return fmt.Errorf("mark alert sent: %w", err)
		}
		return jobs.Complete(ctx, tx, job)
	})
}

// message is an alert's email, rendered from its event (Alert), to the
// endpoint's owner.
func (w *AlertWorker) message(ctx context.Context, a dbq.GetAlertRow) (Message, error) {
	ev := sluice.OpEvent{Type: a.EventType}
	payload, err := w.store.Payloads().OpenJSON(ctx, a.TenantID, a.Payload)
	if err != nil {
		return Message{}, fmt.Errorf("open alert %s: %w", a.ID, err)
	}
	if err := json.Unmarshal(payload, &ev.Payload); err != nil {
		return Message{}, fmt.Errorf("decode alert %s: %w", a.ID, err)
	}
	ev.Payload.URL = a.EndpointUrl // its URL now, if it changed since
	return Alert{
		Event: ev, TenantName: a.TenantName, At: a.CreatedAt,
		DashboardURL: w.publicURL + "/endpoints/" + ev.Payload.EndpointID.String(),
	}.Message(a.AlertEmail, "<alert-"+a.ID.String()+"@sluice>"), nil
}

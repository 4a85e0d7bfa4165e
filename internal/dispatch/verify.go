package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// VerifyWorker challenges an endpoint whose verification is "challenge":
// it POSTs a signed sluice.endpoint.verification event, its payload
// {"challenge", "endpoint_id"}, to the endpoint's URL as a delivery is
// sent (its secret, headers, timeout), and the endpoint is verified when
// the receiver answers 2xx with the JSON body {"challenge": "<the same>"}.
// Then the endpoint's run starts and its queued deliveries go at its rate.
// A wrong or missing answer is recorded on the endpoint
// (verification_error) and the job is retried a few times (jobs.VerifyArgs).
// Nothing of the challenge is stored: it is checked in the exchange that
// carries it.
type VerifyWorker struct {
	river.WorkerDefaults[jobs.VerifyArgs]
	w *Worker
}

// NewVerifyWorker returns the challenge worker of a dispatch worker, whose
// sender and Nudger it uses.
func NewVerifyWorker(w *Worker) *VerifyWorker { return &VerifyWorker{w: w} }

// errNoAnswer is a challenge the receiver did not answer as asked.
var errNoAnswer = errors.New("the receiver did not answer the challenge")

// Work implements river.Worker.
func (v *VerifyWorker) Work(ctx context.Context, job *river.Job[jobs.VerifyArgs]) error {
	target, err := v.target(ctx, job.Args.EndpointID)
	if errors.Is(err, sluice.ErrNotFound) {
		return nil // deleted meanwhile
	}
	if err != nil || !target.Unverified {
		return err // verified already, or no longer asked to be
	}
	challenge := make([]byte, 24)
	_, _ = rand.Read(challenge)
	text := base64.RawURLEncoding.EncodeToString(challenge)
	res := v.w.cfg.Sender.Send(ctx, verification(target, text, v.w.cfg.Clock.Now()))
	answer := answered(res, text)
	tx, err := v.w.db.BeginSync(ctx)
	if err != nil {
		return fmt.Errorf("begin verification record: %w", err)
	}
	defer tx.Rollback(ctx)
	verified, err := tx.recordVerification(ctx, target, answer)
	if err != nil {
		return err
	}
	if verified {
		if err := v.w.cfg.Nudger.Unpark(ctx, tx.Tx(), target.ID, nil); err != nil {
			return fmt.Errorf("start the verified endpoint's dispatch: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit verification record: %w", err)
	}
	return answer
}

// target reads the endpoint as a run would, without keeping its lock
// across the challenge's request.
func (v *VerifyWorker) target(ctx context.Context, id uuid.UUID) (Target, error) {
	tx, err := v.w.db.Begin(ctx)
	if err != nil {
		return Target{}, fmt.Errorf("begin verification read: %w", err)
	}
	defer tx.Rollback(ctx)
	return tx.LockEndpoint(ctx, id)
}

// verification is the challenge's message to target.
func verification(target Target, challenge string, now time.Time) send.Message {
	payload, _ := json.Marshal(map[string]string{"challenge": challenge, "endpoint_id": target.ID.String()})
	id := uuid.Must(uuid.NewV7())
	return send.Message{
		URL: target.URL, ID: id.String(), Keys: target.Keys, Headers: target.Headers, Timeout: target.Timeout,
		Body: Body(Claimed{EventID: id, EventType: sluice.VerificationType, Payload: payload, EventCreatedAt: now}),
	}
}

// answered is nil when res is the receiver's answer to challenge, or why
// not.
func answered(res send.Result, challenge string) error {
	if !res.Delivered() {
		return fmt.Errorf("%w: %s", errNoAnswer, res.Err)
	}
	var body struct {
		Challenge string `json:"challenge"`
	}
	if json.Unmarshal([]byte(res.Body), &body) != nil || body.Challenge != challenge {
		return fmt.Errorf(`%w: a 2xx without the JSON body {"challenge": "<the challenge sent>"}`, errNoAnswer)
	}
	return nil
}

// recordVerification records the answer of target's challenge, and
// reports whether the endpoint is verified now. Either is skipped if its
// URL changed meanwhile, which is challenged again.
func (t *StepTx) recordVerification(ctx context.Context, target Target, answer error) (bool, error) {
	if answer != nil {
		err := t.tx.Q.EndpointVerificationFailed(ctx, dbq.EndpointVerificationFailedParams{
			ID: target.ID, Url: target.URL, Error: new(answer.Error())})
		if err != nil {
			return false, fmt.Errorf("record verification failure: %w", err)
		}
		return false, nil
	}
	n, err := t.tx.Q.EndpointVerified(ctx, dbq.EndpointVerifiedParams{ID: target.ID, Url: target.URL})
	if err != nil {
		return false, fmt.Errorf("record verification: %w", err)
	}
	return n > 0, nil
}

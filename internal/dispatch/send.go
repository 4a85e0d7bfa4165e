package dispatch

import (
	"context"
	"fmt"
	"sync"

	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// sentDelivery is one attempt: what was sent, what came back, and what it
// does to the delivery.
type sentDelivery struct {
	result    send.Result
	outcome   Outcome
	eventType string // for sluice.delivery.dead
	attempts  int    // the delivery's attempts, this one included
}

// sendBatch sends claimed deliveries concurrently. A send that the run cut
// short (shutdown or the job's timeout cancelled ctx before any response
// arrived) is left out: it is not the receiver's failure, costs the
// delivery no retry budget and no circuit failure, and the delivery stays
// due for the next run.
//
// Each delivery's payload is let go of (in claimed at once, in its send
// once it is opened and its body built), so that a delivery in flight
// holds one copy of its event's payload, in its body: a worker's memory is
// what it has in flight, once (SLUICE_MAX_PAYLOAD allows 10 MiB a payload).
// A large payload, which its claim left out, is read once for all the
// deliveries of its event in flight and sent without a copy (large.go).
func (w *Worker) sendBatch(ctx context.Context, target Target, claimed []Claimed) []sentDelivery {
	sent := make([]sentDelivery, len(claimed))
	retry := w.cfg.Retry.For(target)
	cut := make([]bool, len(claimed))
	if len(claimed) == 1 {
		// One delivery is sent on the run's own goroutine, whose stack has
		// grown to what a send takes already; a new goroutine's stack
		// would grow again, copied frame by frame, for every send of a
		// trickle.
		c := claimed[0]
		claimed[0].Payload = nil
		sent[0], cut[0] = w.sendOne(ctx, target, retry, c)
	} else {
		var wg sync.WaitGroup
		for i, c := range claimed {
			claimed[i].Payload = nil
			w.senders.run(&wg, func() { sent[i], cut[i] = w.sendOne(ctx, target, retry, c) })
		}
		wg.Wait()
	}
	kept := sent[:0]
	for i := range sent {
		if !cut[i] {
			kept = append(kept, sent[i])
		}
	}
	return kept
}

// sendOne makes one claimed delivery's attempt; cut says the run cut it
// short (see sendBatch), and then there is no attempt.
func (w *Worker) sendOne(ctx context.Context, target Target, retry Retry, c Claimed) (sent sentDelivery, cut bool) {
	sendCtx, span := w.startAttempt(ctx, target, c)
	body, parts, release, err := w.body(ctx, target, c)
	if err != nil { // nothing to send: a failed attempt, no request made
		res := send.Result{At: w.cfg.Clock.Now(), Err: err.Error()}
		sent = sentDelivery{result: res, outcome: retry.Outcome(c, res, res.At), eventType: c.EventType, attempts: c.AttemptCount + 1}
		endAttempt(span, res, sent.outcome, false)
		return sent, false
	}
	c.Payload = nil
	res := w.sendAuthed(sendCtx, target, send.Message{
		URL:      target.URL,
		ID:       c.EventID.String(),
		Body:     body,
		Parts:    parts,
		Keys:     target.Keys,
		Headers:  target.Headers,
		Sequence: c.Sequence,
		Timeout:  target.Timeout,

		SigningKeys: target.SigningKeys,
		TLS:         target.TLS,
		Destination: target.Destination,
	})
	release()
	if res.StatusCode == 0 && !res.Confirmed && ctx.Err() != nil {
		endAttempt(span, res, Outcome{}, true)
		return sentDelivery{}, true
	}
	sent = sentDelivery{result: res, outcome: retry.Outcome(c, res, w.cfg.Clock.Now()),
		eventType: c.EventType, attempts: c.AttemptCount + 1}
	if w.payloads.Sealing() && res.Body != "" {
		if sent.outcome.ResponseBody, err = w.payloads.SealText(ctx, target.TenantID, res.Body); err != nil {
			sent.outcome.ResponseBody = "" // kept sealed or not at all
		}
	}
	endAttempt(span, res, sent.outcome, false)
	observe(sent)
	if c.AttemptCount == 0 && !c.Replayed {
		metrics.FirstAttemptLag.Observe(res.At.Sub(c.EventCreatedAt).Seconds())
	}
	return sent, false
}

func outcomes(sent []sentDelivery) []Outcome {
	out := make([]Outcome, len(sent))
	for i, s := range sent {
		out[i] = s.outcome
	}
	return out
}

// body is a claimed delivery's body: whole, or for a large payload (left
// out of the claim) in parts around the payload its event's sends in
// flight share, with release to call once it is sent.
func (w *Worker) body(ctx context.Context, target Target, c Claimed) (body []byte, parts [][]byte, release func(), err error) {
	if c.Payload != nil {
		payload, err := w.payloads.OpenJSON(ctx, target.TenantID, c.Payload)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("open sealed payload: %w", err)
		}
		c.Payload = payload
		return Body(c), nil, func() {}, nil
	}
	payload, release, err := w.largePayload(ctx, target.TenantID, c.EventID, true)
	if err != nil {
		return nil, nil, nil, err
	}
	envelope := Body(c) // "{...,"data":}"
	n := len(envelope) - 1
	return nil, [][]byte{envelope[:n:n], payload, envelope[n:]}, release, nil
}

// Body is the Standard Webhooks body of a claimed delivery
// (sluice.WebhookBody).
func Body(c Claimed) []byte {
	return sluice.WebhookBody(c.EventID, c.EventType, c.EventCreatedAt, c.Payload)
}

// observe counts an attempt in the Prometheus metrics.
func observe(s sentDelivery) {
	outcome := s.outcome.Status
	if s.result.Throttled() {
		outcome = "throttled"
	}
	metrics.Attempts.WithLabelValues(outcome).Inc()
	metrics.AttemptSeconds.Observe(s.result.Latency.Seconds())
}

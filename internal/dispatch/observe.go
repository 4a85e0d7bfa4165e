package dispatch

import (
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// observeBatch logs and counts what a committed batch did to its endpoint
// and deliveries: circuit transitions, the start of a throttle window, dead
// letters. It runs once per batch, after the commit, so nothing is told
// that did not happen. Batches that change no flow state (the unlocked
// path) have nothing to log: a dead letter is a failure, which changes the
// circuit's count.
func (w *Worker) observeBatch(target Target, changes []CircuitChange, before, after Flow, sent []sentDelivery) {
	log, id := w.cfg.Logger, target.ID
	for _, a := range changes {
		if a.Opened {
			metrics.CircuitTransitions.WithLabelValues("opened").Inc()
			log.Warn("circuit opened", "endpoint_id", id, "failures", a.Failures, "last_error", a.LastError, "next_probe_at", a.NextProbeAt)
		} else {
			metrics.CircuitTransitions.WithLabelValues("closed").Inc()
			log.Info("circuit closed", "endpoint_id", id)
		}
	}
	if t := after.Throttle; t.Count > before.Throttle.Count {
		log.Info("endpoint throttled", "endpoint_id", id, "until", t.Until, "reason", t.Reason, "consecutive_429s", t.Count)
	} else if t.Count == 0 && before.Throttle.Count > 0 {
		log.Info("endpoint throttle lifted", "endpoint_id", id)
	}
	for _, s := range sent {
		if s.outcome.Status == sluice.DeliveryDead {
			log.Warn("delivery dead-lettered", "endpoint_id", id, "delivery_id", s.outcome.DeliveryID, "event_id", s.outcome.EventID,
				"error", s.result.Err)
		}
	}
}

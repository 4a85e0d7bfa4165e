package dispatch

import (
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// announce logs and counts what a committed batch did to its endpoint and
// deliveries: circuit transitions, the start of a throttle window, dead
// letters. It runs once per batch, after the commit, so nothing is told
// that did not happen.
func (w *Worker) announce(target store.Target, alerts []store.Alert, before, after store.Flow, sent []sentDelivery) {
	log := w.cfg.Logger.With("endpoint_id", target.ID)
	for _, a := range alerts {
		if a.Opened {
			metrics.CircuitTransitions.WithLabelValues("opened").Inc()
			log.Warn("circuit opened", "failures", a.Failures, "last_error", a.LastError, "next_probe_at", a.NextProbeAt)
		} else {
			metrics.CircuitTransitions.WithLabelValues("closed").Inc()
			log.Info("circuit closed")
		}
	}
	if t := after.Throttle; t.Count > before.Throttle.Count {
		log.Info("endpoint throttled", "until", t.Until, "reason", t.Reason, "consecutive_429s", t.Count)
	} else if t.Count == 0 && before.Throttle.Count > 0 {
		log.Info("endpoint throttle lifted")
	}
	for _, s := range sent {
		if s.outcome.Status == sluice.DeliveryDead {
			log.Warn("delivery dead-lettered", "delivery_id", s.outcome.DeliveryID, "event_id", s.outcome.EventID,
				"error", s.result.Err)
		}
	}
}

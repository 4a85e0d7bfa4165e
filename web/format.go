package web

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// timeLayout shows timestamps in UTC, to the second.
const timeLayout = "2006-01-02 15:04:05 UTC"

func utc(t time.Time) string { return t.UTC().Format(timeLayout) }

func utcISO(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func endpointPath(id uuid.UUID) string { return "/endpoints/" + id.String() }

func deliveryPath(id uuid.UUID) string { return "/deliveries/" + id.String() }

func eventPath(id uuid.UUID) string { return "/events/" + id.String() }

func replayDeliveryPath(id uuid.UUID) string { return deliveryPath(id) + "/replay" }

func replayEndpointPath(id uuid.UUID) string { return endpointPath(id) + "/replay" }

func retryDeliveryPath(id uuid.UUID) string { return deliveryPath(id) + "/retry" }

// replayConfirmPath is the confirmation page of replaying an endpoint's
// dead deliveries; from names the page to return to.
func replayConfirmPath(id uuid.UUID, from string) string {
	return replayEndpointPath(id) + "?" + url.Values{"status": {sluice.DeliveryDead}, "from": {from}}.Encode()
}

// replayable reports whether a delivery may be replayed now: delivered or
// dead, without a replay still queued.
func replayable(d sluice.Delivery, replays map[uuid.UUID]ReplayMark) bool {
	if d.Status != sluice.DeliveryDelivered && d.Status != sluice.DeliveryDead {
		return false
	}
	m, ok := replays[d.ID]
	return !ok || !m.Queued()
}

// eventsOfTypePath is the events list filtered to one type.
func eventsOfTypePath(eventType string) string {
	return "/events?" + url.Values{"type": {eventType}}.Encode()
}

// deadPath is the dead-letter list, filtered to one endpoint.
func deadPath(endpointID uuid.UUID) string {
	return "/dead?" + url.Values{"endpoint_id": {endpointID.String()}}.Encode()
}

func rateLimit(rl *sluice.RateLimit) string {
	var s string
	switch {
	case rl == nil:
		return "unlimited"
	case rl.PerSecond > 0:
		s = fmt.Sprintf("%d/s, burst %d", rl.PerSecond, rl.Burst)
	default:
		s = fmt.Sprintf("%d/min, burst %d", rl.PerMinute, rl.Burst)
	}
	switch {
	case !rl.Adaptive:
	case rl.Min > 0:
		s += fmt.Sprintf(", adaptive (min %s/s)", perSecond(rl.Min))
	default:
		s += ", adaptive"
	}
	return s
}

// backlogAlert names an endpoint's backlog alert: "at 1000 queued or
// 600 s waited", or "none".
// timeout is an endpoint's timeout_seconds option.
func timeout(seconds *int) string {
	if seconds == nil {
		return "the server's default"
	}
	return fmt.Sprintf("%d s", *seconds)
}

// retrySchedule is an endpoint's retry_schedule option.
func retrySchedule(s sluice.Schedule) string {
	switch {
	case s == nil:
		return "the server's default"
	case len(s) == 0:
		return "none: one attempt"
	}
	return strings.ReplaceAll(s.String(), ",", ", ")
}

// clientCertificate names an endpoint's tls option: the subject and
// expiry of its client certificate, and whether it brings its own CAs.
// destination describes an endpoint's broker: kind, URL (never with its
// password) and where in the broker its messages go.
func destination(d *sluice.Destination) string {
	s := d.Type + " " + d.URL
	switch d.Type {
	case sluice.DestinationRedis:
		s += ", stream " + d.Stream
		if d.MaxLen > 0 {
			s += fmt.Sprintf(" (trimmed to about %d entries)", d.MaxLen)
		}
	case sluice.DestinationNATS:
		s += ", subject " + d.Subject
	case sluice.DestinationAMQP:
		s += ", exchange " + strconv.Quote(d.Exchange) + ", routing key " + strconv.Quote(d.RoutingKey)
	}
	if d.PasswordSet {
		s += "; password set"
	}
	return s
}

func clientCertificate(o *sluice.TLSOption) string {
	if o == nil {
		return "none"
	}
	s := o.Subject + ", expires " + o.NotAfter.UTC().Format("2006-01-02 15:04 MST")
	if o.CACertificates != "" {
		s += "; the receiver is checked against the endpoint's own CAs"
	}
	return s
}

func oauth(o *sluice.AuthOption) string {
	if o == nil {
		return "none"
	}
	s := "client " + o.ClientID + " at " + o.TokenURL
	if o.Scope != "" {
		s += ", scope " + o.Scope
	}
	if o.Audience != "" {
		s += ", audience " + o.Audience
	}
	return s + "; the secret is set"
}

func backlogAlert(a *sluice.BacklogAlert) string {
	if a == nil {
		return "none"
	}
	var parts []string
	if a.Queued > 0 {
		parts = append(parts, fmt.Sprintf("%d queued", a.Queued))
	}
	if a.OldestSeconds > 0 {
		parts = append(parts, fmt.Sprintf("%d s waited", a.OldestSeconds))
	}
	return "at " + strings.Join(parts, " or ")
}

// rateSummary is an endpoint's rate limit and, when adaptive, what it
// allows now (effective_rate).
func rateSummary(e sluice.Endpoint) string {
	s := rateLimit(e.RateLimit)
	if e.EffectiveRate != nil {
		s += ", now " + perSecond(*e.EffectiveRate) + "/s"
	}
	return s
}

// perSecond is a rate in deliveries a second, to at most two decimals.
func perSecond(r float64) string {
	return strconv.FormatFloat(math.Round(r*100)/100, 'f', -1, 64)
}

func latency(ms int) string { return fmt.Sprintf("%d ms", ms) }

// breakURL is a URL that may break across lines after its slashes and
// nowhere else: each part (urlParts) a span kept on one line (class seg:
// no break at its hyphens), a <wbr> between them, and no space, which a
// templ template would put at its line breaks.
func breakURL(u string) templ.Component {
	return templ.ComponentFunc(func(_ context.Context, w io.Writer) error {
		for i, part := range urlParts(u) {
			s := `<span class="seg">` + templ.EscapeString(part) + `</span>`
			if i > 0 {
				s = "<wbr>" + s
			}
			if _, err := io.WriteString(w, s); err != nil {
				return fmt.Errorf("write url: %w", err)
			}
		}
		return nil
	})
}

// urlParts cuts a URL after each run of slashes, so a page can offer a
// line break there (<wbr>) and nowhere else: "https://a.test/x/y" is
// "https://", "a.test/", "x/", "y".
func urlParts(u string) []string {
	var out []string
	for len(u) > 0 {
		i := strings.IndexByte(u, '/')
		if i < 0 {
			return append(out, u)
		}
		j := i
		for j < len(u) && u[j] == '/' {
			j++
		}
		out = append(out, u[:j])
		u = u[j:]
	}
	return out
}

// endpointOption is how a list of choices names an endpoint: its name,
// and its description beside a URL, so two endpoints with the same URL
// can be told apart.
func endpointOption(e sluice.Endpoint) string {
	if e.URL != "" && e.Description != "" {
		return e.URL + " — " + e.Description
	}
	return endpointName(e)
}

func isFilter(filter *uuid.UUID, id uuid.UUID) bool { return filter != nil && *filter == id }

func plural(n int64, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// replayCount is a count of the deliveries a bulk replay would queue, as
// CountReplayable gives it: exact up to sluice.ReplayCountCap, then "1,000+"
// (the count stops there; the replay queues them all).
func replayCount(n int64, one, many string) string {
	if n > sluice.ReplayCountCap {
		return replayCap() + "+ " + many
	}
	return plural(n, one, many)
}

// replayCap is sluice.ReplayCountCap written with a thousands separator.
func replayCap() string {
	return fmt.Sprintf("%d,%03d", sluice.ReplayCountCap/1000, sluice.ReplayCountCap%1000)
}

// circuitFailures is a circuit's consecutive failures. An open circuit's
// go on counting (circuitCountWhy), so the count can pass the threshold
// that opened it; it says so.
func circuitFailures(cb sluice.Circuit) string {
	s := plural(int64(cb.ConsecutiveFailures), "consecutive failure", "consecutive failures")
	if circuitCounting(cb) {
		s += ", probes included"
	}
	return s
}

// circuitCounting reports whether cb is open or probing, when failures
// go on counting past the threshold.
func circuitCounting(cb sluice.Circuit) bool {
	return cb.State == sluice.CircuitOpen || cb.State == sluice.CircuitHalfOpen
}

// circuitCountWhy is why an open circuit's count passes its threshold.
const circuitCountWhy = "While the circuit is open, its failures go on counting: each failed probe, and each request already in flight when it opened, adds one."

// deliveryStatuses are the timeline's filter choices.
var deliveryStatuses = []string{sluice.DeliveryPending, sluice.DeliveryFailed, sluice.DeliveryDelivered, sluice.DeliveryDead}

// statusClass colours an HTTP status code by its class.
func statusClass(code int) string {
	switch {
	case code >= 200 && code < 300:
		return "code-2xx"
	case code == 429:
		return "code-429"
	case code >= 400 && code < 500:
		return "code-4xx"
	default:
		return "code-5xx"
	}
}

func consumerPath(uid string) string { return "/consumers/" + url.PathEscape(uid) }

// disabledReason says why an endpoint is disabled (Endpoint.DisabledReason).
func disabledReason(reason string) string {
	switch reason {
	case sluice.DisabledGone:
		return "the receiver answered 410 Gone"
	case sluice.DisabledFailing:
		return "every attempt failed for too long"
	default:
		return "disabled from the dashboard or the API"
	}
}

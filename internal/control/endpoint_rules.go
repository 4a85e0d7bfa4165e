package control

import (
	"errors"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"code.dny.dev/ssrf"
	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/idna"

	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// The rules an endpoint's settings and subscriptions follow: every door
// accepts and refuses the same things with the same messages, because
// only the control layer checks them.

// SecretGrace is how long a rotated-out signing secret keeps signing
// beside the new one, so receivers can switch without losing a message.
const SecretGrace = 24 * time.Hour

// Limits on endpoint fields.
const (
	maxURLLength         = 2048
	maxDescriptionLength = 1024
	maxInFlight          = 100
	maxHeaders           = 20
	maxHeaderValueLength = 1024
	maxPerSecond         = 10000
	maxPerMinute         = 600000
	maxBurst             = 10000
	maxBacklogQueued     = 10_000_000
	maxBacklogOldest     = 30 * 24 * 3600 // seconds: the dead-letter retention's default
)

// checkSettings checks an endpoint's settings once every field is set: its
// delivery and URL (checkTargetURL; none for a poll endpoint) or broker
// destination (checkDestination), description,
// max_in_flight, headers, ordering (FIFO only for a push endpoint) and the
// delivery options that need the endpoint's settings (checkPollOptions,
// checkTokenURL). The
// rate limit's fields are checked as they are read (checkRate).
func checkSettings(set sluice.EndpointSettings, allowPrivate bool, v *sluice.ValidationError) {
	switch set.Delivery {
	case sluice.DeliveryPoll:
		if set.URL != "" {
			v.Add("url", "must be left out: a poll endpoint is read from its poll_url, not sent to")
		}
		if set.Options.Destination != nil {
			v.Add("destination", "must be null for a poll endpoint, which is read from its poll_url")
		}
	case "", sluice.DeliveryPush:
		if set.Options.Destination != nil {
			checkDestination(set, allowPrivate, v)
		} else {
			checkTargetURL(set.URL, allowPrivate, v)
		}
	default:
		v.Add("delivery", "must be \"push\" or \"poll\"")
	}
	if len(set.Description) > maxDescriptionLength {
		v.Add("description", "must be at most %d characters", maxDescriptionLength)
	}
	if set.MaxInFlight < 1 || set.MaxInFlight > maxInFlight {
		v.Add("max_in_flight", "must be a whole number from 1 to %d", maxInFlight)
	}
	checkHeaders(set.Headers, v)
	switch o := set.Ordering; {
	case o != "" && o != sluice.OrderingNone && o != sluice.OrderingFIFO:
		v.Add("ordering", "must be %q or %q", sluice.OrderingNone, sluice.OrderingFIFO)
	case o == sluice.OrderingFIFO && set.Delivery == sluice.DeliveryPoll:
		// A poll endpoint's consumer reads its deliveries in order already.
		v.Add("ordering", "must be %q for a poll endpoint: its consumer reads in acceptance order", sluice.OrderingNone)
	}
	if set.BacklogAlert != nil {
		checkBacklogAlert(*set.BacklogAlert, v)
	}
	if set.Delivery == sluice.DeliveryPoll {
		checkPollOptions(set.Options, v)
		return
	}
	checkTokenURL(set.Options.Auth, allowPrivate, v)
}

// checkPollOptions refuses the delivery options that act on a request
// Sluice sends: a poll endpoint is read from its poll_url and never sent
// one, so it has no token to carry (auth), no connection to present a
// client certificate on (tls), no request to sign with Ed25519 (signature
// "v1a" or "v1,v1a": sluice listen signs what it forwards with the v1
// secret) and no URL to challenge (verification).
func checkPollOptions(o sluice.DeliveryOptions, v *sluice.ValidationError) {
	const why = "for a poll endpoint, which is read from its poll_url and never sent a request"
	if o.Auth != nil {
		v.Add("auth", "must be null %s that would carry a token", why)
	}
	if o.TLS != nil {
		v.Add("tls", "must be null %s on which to present a client certificate", why)
	}
	if o.SignsV1a() {
		v.Add("signature", "must be %q %s to sign (sluice listen signs what it forwards with the v1 secret)", sluice.SignatureV1, why)
	}
	if o.Challenged() {
		v.Add("verification", "must be %q for a poll endpoint, which has no URL to challenge", sluice.VerifyNone)
	}
}

// checkBacklogAlert checks a backlog alert's thresholds: at least one set, each
// a whole number in range.
func checkBacklogAlert(a sluice.BacklogAlert, v *sluice.ValidationError) {
	if a.Queued == 0 && a.OldestSeconds == 0 {
		v.Add("backlog_alert", "must set queued, oldest_seconds or both (or be null for no alert)")
	}
	if a.Queued < 0 || a.Queued > maxBacklogQueued {
		v.Add("backlog_alert.queued", "must be a whole number from 1 to %d", maxBacklogQueued)
	}
	if a.OldestSeconds < 0 || a.OldestSeconds > maxBacklogOldest {
		v.Add("backlog_alert.oldest_seconds", "must be a whole number of seconds from 1 to %d", maxBacklogOldest)
	}
}

// rateMax is the largest value of each rate_limit field.
var rateMax = map[string]int{"per_second": maxPerSecond, "per_minute": maxPerMinute, "burst": maxBurst}

// checkRate checks the value n of one rate_limit field: "per_second",
// "per_minute" or "burst".
func checkRate(field string, n int, v *sluice.ValidationError) {
	if n < 1 || n > rateMax[field] {
		v.Add("rate_limit."+field, "must be a whole number from 1 to %d", rateMax[field])
	}
}

// checkAdaptive checks an adaptive rate limit's min: more than 0 and at most
// the rate, in deliveries a second, and set only with adaptive.
func checkAdaptive(rl sluice.RateLimit, v *sluice.ValidationError) {
	switch {
	case rl.Min == 0:
	case !rl.Adaptive:
		v.Add("rate_limit.min", "is the floor of an adaptive rate: set it with \"adaptive\": true")
	case !(rl.Min > 0 && rl.Min <= rl.TokensPerSecond()): // NaN too
		v.Add("rate_limit.min", "must be more than 0 and at most the rate (%g a second)", rl.TokensPerSecond())
	}
}

// Subscription patterns: "*", an exact type, or a type prefix followed by
// ".*"; at most maxPatterns of them, each at most maxEventTypeLength long.
const (
	maxPatterns        = 50
	maxEventTypeLength = 128
)

var patternRE = regexp.MustCompile(`^(\*|[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*(\.\*)?)$`)

// checkPatterns checks a subscription's event-type patterns, as field.
func checkPatterns(field string, patterns []string, v *sluice.ValidationError) {
	switch {
	case len(patterns) == 0:
		v.Add(field, "must list at least one pattern")
	case len(patterns) > maxPatterns:
		v.Add(field, "must list at most %d patterns", maxPatterns)
	}
	for _, p := range patterns {
		if len(p) > maxEventTypeLength || !patternRE.MatchString(p) {
			v.Add(field, "%q is not \"*\", an event type or a prefix such as \"video.*\"", p)
		}
	}
}

// checkTargetURL accepts absolute https URLs (and http ones when private
// targets are allowed) without credentials or fragment, with a port from 1
// to 65535 if any. A host that is an IP literal must pass the dialler's own
// check (send.CheckAddr), so that what validates can be dialled; a
// localhost name or a legacy numeric form is refused unless private
// targets are allowed. Names are checked again when dialled, against what
// they resolve to.
func checkTargetURL(raw string, allowPrivate bool, v *sluice.ValidationError) {
	if raw == "" {
		v.Add("url", "is required")
		return
	}
	if len(raw) > maxURLLength {
		v.Add("url", "must be at most %d characters", maxURLLength)
		return
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" {
		v.Add("url", "must be an absolute URL such as https://example.com/webhooks")
		return
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowPrivate:
	case u.Scheme == "http":
		v.Add("url", "must use https")
		return
	case allowPrivate:
		v.Add("url", "must use http or https, not %q", u.Scheme)
		return
	default:
		v.Add("url", "must use https, not %q", u.Scheme)
		return
	}
	switch {
	case u.User != nil:
		v.Add("url", "must not contain a username or password")
	case u.Fragment != "":
		v.Add("url", "must not contain a #fragment")
	case !validPort(u.Port()):
		v.Add("url", "must have a port from 1 to 65535, not %q", u.Port())
	default:
		targetHost(u.Hostname(), allowPrivate, v)
	}
}

// validPort reports whether port (digits, as url.Parse leaves it) is empty
// or from 1 to 65535.
func validPort(port string) bool {
	if port == "" {
		return true
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535
}

// targetHost checks the host of an endpoint URL as the dialler will read
// it. A host that is not ASCII is first mapped as net/http maps it before
// dialling (IDNA, UTS #46 for lookup), so "１２７.0.0.1" (full-width
// digits) is checked as the 127.0.0.1 it is dialled as. A host that a
// resolver may read as an IPv4 address other than as written (inet_aton's
// forms: 2130706433, 0177.0.0.1, 0x7f.1, or a trailing dot) is refused in
// every mode, naming the address it would be: what the dialler reaches
// would depend on the resolver, and the literal form says the same.
func targetHost(host string, allowPrivate bool, v *sluice.ValidationError) {
	written := host
	if !isASCII(host) {
		mapped, err := idna.Lookup.ToASCII(host)
		if err != nil {
			v.Add("url", "must have a valid host name, not %q", written)
			return
		}
		host = mapped
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		if a, ok := legacyIPv4(host); ok {
			v.Add("url", "must write an IP address in the usual form: %q would be read as %s; write %s", written, a, a)
			return
		}
		if !allowPrivate && isPrivateName(host) {
			v.Add("url", "must point at a public address, not %q", written)
		}
		return
	}
	if addr.Zone() != "" {
		v.Add("url", "must not name an IPv6 zone (%q)", written)
		return
	}
	// An IPv4-mapped literal is dialled as the IPv4 address it holds.
	err = send.CheckAddr(addr.Unmap(), allowPrivate)
	switch {
	case errors.Is(err, send.ErrMetadataAddr):
		v.Add("url", "must not point at a cloud metadata address (%q)", written)
	case err != nil:
		v.Add("url", "must point at an address Sluice delivers to, not %q (%s)", written, addrReason(err))
	}
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// legacyIPv4 reads host as inet_aton(3) does, which getaddrinfo (and so a
// system resolver) falls back to: one to four parts, each decimal, octal
// (a leading 0) or hexadecimal (0x), the last filling the bytes left; a
// trailing dot is allowed. It reports false for anything else, and for
// the plain dotted quad, which is no legacy form.
func legacyIPv4(host string) (netip.Addr, bool) {
	host = strings.TrimSuffix(host, ".")
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var b [4]byte
	for i, p := range parts {
		base, digits := 10, p
		switch {
		case len(p) > 2 && (p[:2] == "0x" || p[:2] == "0X"):
			base, digits = 16, p[2:]
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		n, err := strconv.ParseUint(digits, base, 32)
		if err != nil || digits == "" || strings.ContainsAny(digits, "+-_") {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 255 {
				return netip.Addr{}, false
			}
			b[i] = byte(n)
			continue
		}
		left := 4 - i // bytes the last part fills
		if left < 4 && n >= 1<<(8*left) {
			return netip.Addr{}, false
		}
		for j := 3; j >= i; j-- {
			b[j] = byte(n)
			n >>= 8
		}
	}
	return netip.AddrFrom4(b), true
}

// addrReason is why the address policy refused an address, without the
// ssrf package's prefix.
func addrReason(err error) string {
	return strings.TrimPrefix(err.Error(), ssrf.ErrProhibitedIP.Error()+": ")
}

// isPrivateName reports whether host, which is not an IP literal, is a
// localhost name, or one of the odd legacy numeric forms (0x7f.1,
// 2130706433) that resolvers may still read as addresses.
func isPrivateName(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	return net.ParseIP(host) != nil || looksNumeric(host)
}

func looksNumeric(host string) bool {
	return strings.Trim(host, "0123456789abcdefx.") == "" && strings.ContainsAny(host, "0123456789")
}

// checkHeaders checks an endpoint's static headers: valid names and
// values, none of send.ReservedHeaders (which Sluice or the HTTP stack
// sets, or which are hop-by-hop), and no two names that differ only in
// case (HTTP names are case-insensitive: only one could be sent).
func checkHeaders(headers map[string]string, v *sluice.ValidationError) {
	if len(headers) > maxHeaders {
		v.Add("headers", "must hold at most %d headers", maxHeaders)
	}
	seen := make(map[string]string, len(headers))
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		value := headers[name]
		field := "headers." + name
		switch {
		case !httpguts.ValidHeaderFieldName(name):
			v.Add(field, "is not a valid header name")
		case send.IsReservedHeader(name):
			v.Add(field, "is set by Sluice or by HTTP itself and cannot be set here")
		case seen[strings.ToLower(name)] != "":
			v.Add(field, "repeats headers.%s: header names are case-insensitive", seen[strings.ToLower(name)])
		case !httpguts.ValidHeaderFieldValue(value) || len(value) > maxHeaderValueLength:
			v.Add(field, "must be a valid header value of at most %d characters", maxHeaderValueLength)
		}
		if seen[strings.ToLower(name)] == "" {
			seen[strings.ToLower(name)] = name
		}
	}
}

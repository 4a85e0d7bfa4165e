package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/sluice-dev/sluice/internal/sender"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// Limits on endpoint fields.
const (
	maxURLLength         = 2048
	maxDescriptionLength = 1024
	maxInFlightLimit     = 100
	maxHeaders           = 20
	maxHeaderValueLength = 1024
	maxPerSecond         = 10000
	maxPerMinute         = 600000
	maxBurst             = 10000
)

// endpointInput is the body of POST and PATCH /v1/endpoints: every field
// optional so PATCH can tell "absent" from "set". RateLimit stays raw to
// tell "absent" from an explicit null, which removes the limit; an
// explicit null for any other field is refused (nulls).
type endpointInput struct {
	URL         *string            `json:"url"`
	Description *string            `json:"description"`
	RateLimit   json.RawMessage    `json:"rate_limit"`
	MaxInFlight *int               `json:"max_in_flight"`
	Headers     *map[string]string `json:"headers"`
	Disabled    *bool              `json:"disabled"`
	// Consumer is chosen at creation only (consumer below).
	Consumer *string `json:"consumer"`

	nulls []string // fields sent as null that cannot be null
}

// nonNullable are the fields an explicit null cannot clear.
var nonNullable = []string{"url", "description", "max_in_flight", "headers", "disabled", "consumer"}

// UnmarshalJSON decodes strictly (unknown fields refused), names a
// fractional or huge max_in_flight plainly, and records explicit nulls,
// which plain decoding would take for absent fields.
func (in *endpointInput) UnmarshalJSON(data []byte) error {
	type plain endpointInput // without this method
	var p plain
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field == "max_in_flight" && strings.HasPrefix(te.Value, "number") {
			v := &sluice.ValidationError{}
			v.Add("max_in_flight", "must be a whole number from 1 to %d", maxInFlightLimit)
			return v
		}
		return err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return err
	}
	for _, name := range nonNullable {
		if raw, ok := fields[name]; ok && bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			p.nulls = append(p.nulls, name)
		}
	}
	*in = endpointInput(p)
	return nil
}

type rateLimitInput struct {
	PerSecond *int `json:"per_second"`
	PerMinute *int `json:"per_minute"`
	Burst     *int `json:"burst"`
}

// consumer returns the consumer of a new endpoint, or checks that an update
// leaves the endpoint's (current) unchanged: an endpoint never moves
// between consumers, or between a consumer and the tenant.
func (in endpointInput) consumer(current *string, creating bool, v *sluice.ValidationError) *string {
	switch {
	case in.Consumer == nil:
	case creating && !sluice.ValidConsumerUID(*in.Consumer):
		v.Add("consumer", sluice.ConsumerUIDRule)
	case creating:
		return in.Consumer
	case current == nil || *current != *in.Consumer:
		v.Add("consumer", "is chosen when the endpoint is created and cannot change")
	}
	return current
}

// apply writes the fields present in in over set, then validates the result.
func (in endpointInput) apply(set *sluice.EndpointSettings, creating, allowPrivate bool) error {
	v := &sluice.ValidationError{}
	set.Consumer = in.consumer(set.Consumer, creating, v)
	for _, name := range in.nulls {
		v.Add(name, "must not be null; leave it out to keep the current value")
	}
	if in.URL != nil {
		set.URL = strings.TrimSpace(*in.URL)
	}
	if in.Description != nil {
		set.Description = *in.Description
	}
	if in.RateLimit != nil {
		set.RateLimit = parseRateLimit(in.RateLimit, v)
	}
	if in.MaxInFlight != nil {
		set.MaxInFlight = *in.MaxInFlight
	}
	if in.Headers != nil {
		set.Headers = *in.Headers
	}
	if set.Headers == nil {
		set.Headers = map[string]string{}
	}
	if in.Disabled != nil {
		set.Disabled = *in.Disabled
	}

	validateTargetURL(set.URL, allowPrivate, v)
	if len(set.Description) > maxDescriptionLength {
		v.Add("description", "must be at most %d characters", maxDescriptionLength)
	}
	if set.MaxInFlight < 1 || set.MaxInFlight > maxInFlightLimit {
		v.Add("max_in_flight", "must be a whole number from 1 to %d", maxInFlightLimit)
	}
	validateHeaders(set.Headers, v)
	return v.Err()
}

func parseRateLimit(raw json.RawMessage, v *sluice.ValidationError) *sluice.RateLimit {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	var in rateLimitInput
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && rateLimitMax[te.Field] > 0 {
			v.Add("rate_limit."+te.Field, "must be a whole number from 1 to %d", rateLimitMax[te.Field])
			return nil
		}
		v.Add("rate_limit", "must be an object with per_second or per_minute (whole numbers) and an optional burst")
		return nil
	}
	rl := &sluice.RateLimit{}
	switch {
	case (in.PerSecond == nil) == (in.PerMinute == nil):
		v.Add("rate_limit", "must set exactly one of per_second and per_minute")
		return nil
	case in.PerSecond != nil:
		rl.PerSecond = *in.PerSecond
		rl.Burst = rl.PerSecond
		if rl.PerSecond < 1 || rl.PerSecond > maxPerSecond {
			v.Add("rate_limit.per_second", "must be a whole number from 1 to %d", maxPerSecond)
		}
	default:
		rl.PerMinute = *in.PerMinute
		rl.Burst = 1
		if rl.PerMinute < 1 || rl.PerMinute > maxPerMinute {
			v.Add("rate_limit.per_minute", "must be a whole number from 1 to %d", maxPerMinute)
		}
	}
	if in.Burst != nil {
		rl.Burst = *in.Burst
		if rl.Burst < 1 || rl.Burst > maxBurst {
			v.Add("rate_limit.burst", "must be a whole number from 1 to %d", maxBurst)
		}
	}
	return rl
}

// rateLimitMax is each rate_limit field's largest value.
var rateLimitMax = map[string]int{"per_second": maxPerSecond, "per_minute": maxPerMinute, "burst": maxBurst}

// validateTargetURL accepts absolute https URLs (and http ones when private
// targets are allowed) without credentials, whose host is not a loopback,
// private or otherwise special address unless private targets are allowed.
// Names are checked again when dialled, against what they resolve to.
func validateTargetURL(raw string, allowPrivate bool, v *sluice.ValidationError) {
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
	if u.User != nil {
		v.Add("url", "must not contain a username or password")
		return
	}
	if u.Fragment != "" {
		v.Add("url", "must not contain a #fragment")
		return
	}
	if isMetadataHost(u.Hostname()) {
		v.Add("url", "must not point at a cloud metadata address (%q)", u.Hostname())
		return
	}
	if !allowPrivate && isPrivateHost(u.Hostname()) {
		v.Add("url", "must point at a public address, not %q", u.Hostname())
	}
}

// isPrivateHost reports whether host names a loopback, private, link-local,
// unspecified or otherwise non-public address, or a localhost name.
func isPrivateHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		// Not a canonical literal; refuse the odd legacy forms (0x7f.1,
		// 2130706433) that resolvers may still read as addresses.
		return net.ParseIP(host) != nil || looksNumeric(host)
	}
	addr = addr.Unmap()
	return !addr.IsGlobalUnicast() || addr.IsPrivate() || addr.IsLoopback() ||
		addr.IsLinkLocalUnicast() || sharedAddressSpace.Contains(addr)
}

// isMetadataHost reports whether host is a literal cloud metadata address,
// refused even when private targets are allowed (the sender's dialer
// checks names again once resolved).
func isMetadataHost(host string) bool {
	addr, err := netip.ParseAddr(strings.TrimSuffix(host, "."))
	return err == nil && sender.IsMetadataAddr(addr)
}

// sharedAddressSpace is carrier-grade NAT space (RFC 6598), not public.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

func looksNumeric(host string) bool {
	return strings.Trim(host, "0123456789abcdefx.") == "" && strings.ContainsAny(host, "0123456789")
}

// validateHeaders checks an endpoint's static headers: valid names and
// values, none of sender.ReservedHeaders (which Sluice or the HTTP stack
// sets, or which are hop-by-hop), and no two names that differ only in
// case (HTTP names are case-insensitive: only one could be sent).
func validateHeaders(headers map[string]string, v *sluice.ValidationError) {
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
		case sender.IsReservedHeader(name):
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

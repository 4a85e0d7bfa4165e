package control

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// The rules of the destination delivery option: a message broker the
// endpoint delivers to instead of a URL, {"type": "redis", "url",
// "stream", "max_len"?}, {"type": "nats", "url", "subject"} or {"type":
// "amqp", "url", "exchange", "routing_key"}. It is exclusive with url.
// The URL's password is write-only: a read shows the URL without it and
// password_set, and a request that sends that URL back keeps the stored
// one. The broker's host passes the address checks of an endpoint's url
// (checkDestinationURL, from checkSettings).

// destinationInput is the destination option as a request writes it.
type destinationInput struct {
	Type       *string `json:"type"`
	URL        *string `json:"url"`
	Stream     *string `json:"stream"`
	MaxLen     *int64  `json:"max_len"`
	Subject    *string `json:"subject"`
	Exchange   *string `json:"exchange"`
	RoutingKey *string `json:"routing_key"`
	// What a read shows beside them, taken back and ignored.
	PasswordSet json.RawMessage `json:"password_set"`
}

// destinationSchemes are the URL schemes of each kind: plain, then TLS.
var destinationSchemes = map[string][]string{
	sluice.DestinationRedis: {"redis", "rediss"},
	sluice.DestinationNATS:  {"nats", "tls"},
	sluice.DestinationAMQP:  {"amqp", "amqps"},
}

// destinationOption reads a destination option that is not null; prev
// is the endpoint's before the request, whose sealed URL a request
// sending back the URL without password keeps.
func destinationOption(raw json.RawMessage, prev *sluice.Destination, v *sluice.ValidationError) *sluice.Destination {
	var in destinationInput
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		v.Add("destination", `must be null or an object with type ("redis", "nats" or "amqp"), url and the names of its kind (%s)`, jsonReason(err))
		return nil
	}
	if in.Type == nil || !slices.Contains(sluice.DestinationKinds, *in.Type) {
		v.Add("destination.type", `must be "redis", "nats" or "amqp"`)
		return nil
	}
	if !send.Delivers(*in.Type) {
		v.Add("destination.type", "%q is not delivered by this server yet", *in.Type)
		return nil
	}
	before := len(v.Fields)
	d := &sluice.Destination{Type: *in.Type}
	d.URL, d.FullURL, d.PasswordSet = destinationURL(d.Type, in.URL, v)
	if prev != nil && d.FullURL == nil && prev.Type == d.Type && prev.URL == d.URL {
		d.PasswordSet = prev.PasswordSet // the stored URL stays, password and all
	} else if d.FullURL == nil && in.URL != nil {
		d.FullURL = []byte(d.URL)
	}
	only := func(field string, set bool, kind string) {
		if set && d.Type != kind {
			v.Add("destination."+field, "is for %s destinations, not %s", kind, d.Type)
		}
	}
	only("stream", in.Stream != nil, sluice.DestinationRedis)
	only("max_len", in.MaxLen != nil, sluice.DestinationRedis)
	only("subject", in.Subject != nil, sluice.DestinationNATS)
	only("exchange", in.Exchange != nil, sluice.DestinationAMQP)
	only("routing_key", in.RoutingKey != nil, sluice.DestinationAMQP)
	switch d.Type {
	case sluice.DestinationRedis:
		d.Stream = destinationName("stream", in.Stream, true, v)
		if in.MaxLen != nil {
			if *in.MaxLen < 0 || *in.MaxLen > sluice.MaxStreamLength {
				v.Add("destination.max_len", "must be a whole number from 1 to %d, or left out for no trimming", int64(sluice.MaxStreamLength))
			}
			d.MaxLen = *in.MaxLen
		}
	case sluice.DestinationNATS:
		d.Subject = destinationName("subject", in.Subject, true, v)
		if d.Subject != "" && !validSubject(d.Subject) {
			v.Add("destination.subject", "must be a NATS subject of dot-separated tokens, without spaces or the wildcards * and >")
		}
	case sluice.DestinationAMQP:
		d.Exchange = destinationName("exchange", in.Exchange, false, v) // "": the default exchange
		d.RoutingKey = destinationName("routing_key", in.RoutingKey, false, v)
	}
	if len(v.Fields) > before {
		return nil
	}
	return d
}

// destinationURL reads the URL of a destination of kind: the URL as shown
// (without password), the URL as sent when it carries a password (to be
// sealed), and whether it does. Its host is checked by
// checkDestinationURL.
func destinationURL(kind string, raw *string, v *sluice.ValidationError) (public string, full []byte, password bool) {
	const field = "destination.url"
	schemes := destinationSchemes[kind]
	if raw == nil || strings.TrimSpace(*raw) == "" {
		v.Add(field, "is required: the broker's %s://host:port URL", schemes[0])
		return "", nil, false
	}
	text := strings.TrimSpace(*raw)
	if len(text) > maxURLLength {
		v.Add(field, "must be at most %d characters", maxURLLength)
		return "", nil, false
	}
	u, err := url.Parse(text)
	switch {
	case err != nil || u.Host == "" || strings.Contains(u.Host, ","):
		v.Add(field, "must be one broker's absolute URL such as %s://host:port", schemes[0])
		return "", nil, false
	case !slices.Contains(schemes, u.Scheme):
		v.Add(field, "must use %s or %s for a %s destination, not %q", schemes[0], schemes[1], kind, u.Scheme)
		return "", nil, false
	case u.RawQuery != "" || u.Fragment != "":
		v.Add(field, "must not carry a ?query or #fragment")
		return "", nil, false
	case !validPort(u.Port()):
		v.Add(field, "must have a port from 1 to 65535, not %q", u.Port())
		return "", nil, false
	}
	if _, password = u.User.Password(); password {
		full = []byte(text)
		u.User = url.User(u.User.Username())
		if u.User.Username() == "" {
			u.User = nil
		}
	}
	return u.String(), full, password
}

// destinationName reads one name of a destination: at most
// MaxDestinationName characters, without control characters.
func destinationName(field string, p *string, required bool, v *sluice.ValidationError) string {
	s := ""
	if p != nil {
		s = *p
	}
	switch {
	case s == "" && required:
		v.Add("destination."+field, "is required")
	case len(s) > sluice.MaxDestinationName:
		v.Add("destination."+field, "must be at most %d characters", sluice.MaxDestinationName)
	case strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }):
		v.Add("destination."+field, "must not contain control characters")
	}
	return s
}

// validSubject reports whether s is a NATS subject one can publish to.
func validSubject(s string) bool {
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n*>") {
			return false
		}
	}
	return true
}

// checkDestination checks a push endpoint's destination against its other
// settings: exclusive with url, its host
// passing the address checks of a url, and none of the options that act
// on an HTTP request (auth, tls, verification).
func checkDestination(set sluice.EndpointSettings, allowPrivate bool, v *sluice.ValidationError) {
	d, o := set.Options.Destination, set.Options
	if set.URL != "" {
		v.Add("url", "must be left out with a destination: url and destination are exclusive")
	}
	if u, err := url.Parse(d.URL); err == nil {
		var hv sluice.ValidationError
		targetHost(u.Hostname(), allowPrivate, &hv)
		for _, f := range hv.Fields {
			v.Add("destination.url", "%s", strings.Replace(f.Message, "must point at an address Sluice delivers to", "must point at an address Sluice publishes to", 1))
		}
	}
	const why = "with a destination, which is sent no HTTP request"
	if o.Auth != nil {
		v.Add("auth", "must be null %s", why)
	}
	if o.TLS != nil {
		v.Add("tls", "must be null %s (a rediss, tls or amqps URL uses TLS)", why)
	}
	if o.Challenged() {
		v.Add("verification", "must be %q %s", sluice.VerifyNone, why)
	}
}

// saveDestination seals endpoint id's destination URL as a change moved
// its destination from before to after: removed with the option, sealed
// anew when the request sent a URL, kept when it sent back the one shown.
func (c *Control) saveDestination(ctx context.Context, tenantID, id uuid.UUID, before, after *sluice.Destination) error {
	var sealed []byte
	switch {
	case after == nil && before == nil:
		return nil
	case after == nil:
	case after.FullURL == nil:
		return nil
	default:
		sealed = c.store.SealSecret(after.FullURL)
	}
	return store.ExecRows(ctx, c.store, (*dbq.Queries).SetEndpointDestinationURL,
		dbq.SetEndpointDestinationURLParams{TenantID: tenantID, ID: id, DestinationUrlEnc: sealed})
}

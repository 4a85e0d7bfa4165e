package sluice

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// DeliveryOptions are an endpoint's own choices of how its deliveries are
// sent; a nil option is the server's default. They are fields of the
// endpoint in the API and are stored together, as one document that is
// null while every option is the default: an endpoint that uses none pays
// nothing for them.
//
// An option is added here (with its json name, and its text in Texts),
// read and checked where the control layer applies it (control's
// delivery_options.go), shown on the endpoint form and page (web), and
// used where deliveries are sent (dispatch).
type DeliveryOptions struct {
	// TimeoutSeconds bounds each attempt, in whole seconds
	// (MinTimeoutSeconds to MaxTimeoutSeconds); nil: SLUICE_DELIVERY_TIMEOUT.
	TimeoutSeconds *int `json:"timeout_seconds"`
	// RetrySchedule is the waits between failed attempts: len+1 attempts
	// in all. Nil: SLUICE_RETRY_SCHEDULE.
	RetrySchedule Schedule `json:"retry_schedule"`
	// Auth is how attempts authenticate to the receiver: an OAuth2 access
	// token (client credentials); nil: none.
	Auth *AuthOption `json:"auth"`
	// Signature is how deliveries are signed: SignatureV1 (HMAC-SHA256),
	// SignatureV1a (Ed25519, with the endpoint's key pair) or
	// SignatureBoth. Nil: SignatureV1.
	Signature *string `json:"signature"`
	// TLS is the client certificate the attempts present (mutual TLS) and
	// the CAs they trust the receiver's certificate on; nil: none, and the
	// system roots.
	TLS *TLSOption `json:"tls"`
	// Verification is VerifyNone or VerifyChallenge; nil: VerifyNone.
	Verification *string `json:"verification"`
	// Destination is the message broker the endpoint delivers to instead
	// of a URL; nil: its url.
	Destination *Destination `json:"destination"`
}

// The values of DeliveryOptions.Signature: Standard Webhooks' symmetric
// (v1) and asymmetric (v1a) schemes, or both, to migrate.
const (
	SignatureV1   = "v1"
	SignatureV1a  = "v1a"
	SignatureBoth = "v1,v1a"
)

// SignsV1 reports whether deliveries carry v1 (HMAC) signatures.
func (o DeliveryOptions) SignsV1() bool {
	return o.Signature == nil || *o.Signature != SignatureV1a
}

// SignsV1a reports whether deliveries carry v1a (Ed25519) signatures: the
// endpoint then has a key pair, published in its tenant's JWKS.
func (o DeliveryOptions) SignsV1a() bool {
	return o.Signature != nil && (*o.Signature == SignatureV1a || *o.Signature == SignatureBoth)
}

// Verification modes: with VerifyChallenge, an endpoint receives nothing
// but a signed challenge (VerificationType) until it answers one.
const (
	VerifyNone      = "none"
	VerifyChallenge = "challenge"
)

// Challenged reports whether the endpoint must answer a challenge before
// anything is sent to it.
func (o DeliveryOptions) Challenged() bool {
	return o.Verification != nil && *o.Verification == VerifyChallenge
}

// Bounds of the delivery options.
const (
	MinTimeoutSeconds = 1
	MaxTimeoutSeconds = 60
	MaxRetrySteps     = 20
	MaxRetryTotal     = 7 * 24 * time.Hour
)

// IsZero reports whether every option is the default.
func (o DeliveryOptions) IsZero() bool {
	return reflect.ValueOf(o).IsZero()
}

// Timeout is the attempt timeout the options set; 0 for the default.
func (o DeliveryOptions) Timeout() time.Duration {
	if o.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*o.TimeoutSeconds) * time.Second
}

// Texts are the options as a form shows them, by json name: "" for the
// default.
func (o DeliveryOptions) Texts() map[string]string {
	t := map[string]string{"retry_schedule": strings.ReplaceAll(o.RetrySchedule.String(), ",", ", ")}
	if o.TimeoutSeconds != nil {
		t["timeout_seconds"] = strconv.Itoa(*o.TimeoutSeconds)
	}
	if o.Signature != nil {
		t["signature"] = *o.Signature
	}
	if o.Auth != nil { // the secret is write-only: its field stays empty
		t["auth.token_url"], t["auth.client_id"] = o.Auth.TokenURL, o.Auth.ClientID
		t["auth.scope"], t["auth.audience"] = o.Auth.Scope, o.Auth.Audience
	}
	if o.TLS != nil { // the key is write-only: its field stays empty
		t["tls.client_certificate"], t["tls.ca_certificates"] = o.TLS.ClientCertificate, o.TLS.CACertificates
	}
	if o.Verification != nil {
		t["verification"] = *o.Verification
	}
	if d := o.Destination; d != nil { // the password is write-only: the URL is shown without it
		t["destination.type"], t["destination.url"] = d.Type, d.URL
		t["destination.stream"], t["destination.subject"] = d.Stream, d.Subject
		t["destination.exchange"], t["destination.routing_key"] = d.Exchange, d.RoutingKey
		if d.MaxLen > 0 {
			t["destination.max_len"] = strconv.FormatInt(d.MaxLen, 10)
		}
	}
	return t
}

// DeliveryOptionFields are the names of the form fields of the delivery
// options: their json names, but for tls, whose three fields are named
// tls.client_certificate, tls.client_key and tls.ca_certificates, and
// auth, whose fields are AuthFormFields.
var DeliveryOptionFields = func() []string {
	var out []string
	for _, name := range DeliveryOptionNames {
		switch name {
		case "tls":
			out = append(out, "tls.client_certificate", "tls.client_key", "tls.ca_certificates")
		case "auth":
			out = append(out, AuthFormFields...)
		case "destination":
			out = append(out, DestinationFormFields...)
		default:
			out = append(out, name)
		}
	}
	return out
}()

// DestinationFormFields are the form fields of the destination option:
// destination.type (empty for none), destination.url (shown without its
// password) and the names of each kind.
var DestinationFormFields = []string{"destination.type", "destination.url", "destination.stream", "destination.max_len",
	"destination.subject", "destination.exchange", "destination.routing_key"}

// AuthFormFields are the form fields of the auth option, the type being
// implied: auth.token_url, auth.client_id, auth.client_secret, auth.scope
// and auth.audience.
var AuthFormFields = []string{"auth.token_url", "auth.client_id", "auth.client_secret", "auth.scope", "auth.audience"}

// DeliveryOptionNames are the json names of the delivery options, in the
// order DeliveryOptions declares them.
var DeliveryOptionNames = func() []string {
	t := reflect.TypeFor[DeliveryOptions]()
	names := make([]string, t.NumField())
	for i := range names {
		names[i], _, _ = strings.Cut(t.Field(i).Tag.Get("json"), ",")
	}
	return names
}()

// Schedule is a list of waits, written in JSON as Go durations ("30s",
// "5m", "1h30m").
type Schedule []time.Duration

// MarshalJSON writes each wait as a Go duration; a nil schedule is null.
func (s Schedule) MarshalJSON() ([]byte, error) {
	if s == nil {
		return []byte("null"), nil
	}
	out := make([]string, len(s))
	for i, d := range s {
		out[i] = d.String()
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode schedule: %w", err)
	}
	return b, nil
}

// UnmarshalJSON reads a list of Go durations.
func (s *Schedule) UnmarshalJSON(b []byte) error {
	var in []string
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("decode schedule: %w", err)
	}
	if in == nil {
		*s = nil
		return nil
	}
	out := make(Schedule, len(in))
	for i, text := range in {
		d, err := time.ParseDuration(text)
		if err != nil {
			return fmt.Errorf("decode schedule step %d: %w", i, err)
		}
		out[i] = d
	}
	*s = out
	return nil
}

// String writes the schedule as a comma-separated list of Go durations,
// as SLUICE_RETRY_SCHEDULE is written; "" when nil.
func (s Schedule) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

// PublicKey is an active v1a public key of an endpoint, as its tenant's
// JWKS publishes it.
type PublicKey struct {
	EndpointID uuid.UUID
	// Version counts the endpoint's key pairs: a new one at each rotation.
	Version int
	// Key is the 32-byte Ed25519 public key.
	Key []byte
}

// KID is the key's id in the JWKS: the endpoint id and the key's version,
// "<endpoint id>.<version>".
func (k PublicKey) KID() string {
	return k.EndpointID.String() + "." + strconv.Itoa(k.Version)
}

package control

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// OptionsInput holds the delivery options a request names, each as the
// JSON it sent (sluice.DeliveryOptionNames are the names): a value sets
// the option, null gives it back to the server's default, and an option
// the request does not name stays as it is.
type OptionsInput map[string]json.RawMessage

// FormOptions reads the delivery options of a form, each as typed (by
// json name; "" for the server's default), as the JSON the API takes, for
// applyOptions to check under the API's rules: a timeout that is not a
// whole number goes as text, to be refused, a schedule is split at
// commas and spaces, tls is made of its three fields (formTLS) and
// auth of its five (formAuth).
func FormOptions(texts map[string]string) OptionsInput {
	in := OptionsInput{}
	for _, name := range sluice.DeliveryOptionNames {
		switch name {
		case "tls":
			in[name] = formTLS(texts)
			continue
		case "auth":
			in[name] = formAuth(texts)
			continue
		case "destination":
			in[name] = formDestination(texts)
			continue
		}
		text := strings.TrimSpace(texts[name])
		if text == "" {
			in[name] = json.RawMessage("null")
			continue
		}
		var v any = text
		switch name {
		case "timeout_seconds":
			if n, err := strconv.Atoi(text); err == nil {
				v = n
			}
		case "retry_schedule":
			v = strings.FieldsFunc(text, func(r rune) bool { return r == ',' || r == ' ' })
		}
		in[name], _ = json.Marshal(v) // a string, a number or a list of strings
	}
	return in
}

// formDestination is the destination option of a form's fields: null
// without a type; otherwise the type, the URL (as shown, it keeps the
// stored password) and the names of that kind. A max_len that is not a
// whole number is sent as -1, refused as out of range.
func formDestination(texts map[string]string) json.RawMessage {
	text := func(f string) string { return strings.TrimSpace(texts["destination."+f]) }
	kind := text("type")
	if kind == "" {
		return json.RawMessage("null")
	}
	obj := map[string]any{"type": kind, "url": text("url")}
	switch kind {
	case sluice.DestinationRedis:
		obj["stream"] = text("stream")
		if n := text("max_len"); n != "" {
			obj["max_len"] = int64(-1)
			if v, err := strconv.ParseInt(n, 10, 64); err == nil {
				obj["max_len"] = v
			}
		}
	case sluice.DestinationNATS:
		obj["subject"] = text("subject")
	case sluice.DestinationAMQP:
		obj["exchange"], obj["routing_key"] = text("exchange"), text("routing_key")
	}
	raw, _ := json.Marshal(obj) // strings and a number
	return raw
}

// formTLS is the tls option of a form's three fields: null when all are
// empty; an empty key keeps the stored one.
func formTLS(texts map[string]string) json.RawMessage {
	obj := map[string]string{}
	for _, f := range []string{"client_certificate", "client_key", "ca_certificates"} {
		if text := strings.TrimSpace(texts["tls."+f]); text != "" {
			obj[f] = text
		}
	}
	if len(obj) == 0 {
		return json.RawMessage("null")
	}
	raw, _ := json.Marshal(obj) // strings alone
	return raw
}

// applyOptions writes the options in over opts, each checked against its
// rules; a failing option is added to v and leaves opts as it was.
func applyOptions(opts *sluice.DeliveryOptions, in OptionsInput, v *sluice.ValidationError) {
	for name, raw := range in {
		null := bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
		switch name {
		case "timeout_seconds":
			opts.TimeoutSeconds = nil
			if !null {
				opts.TimeoutSeconds = timeoutSeconds(raw, v)
			}
		case "retry_schedule":
			opts.RetrySchedule = nil
			if !null {
				opts.RetrySchedule = retrySchedule(raw, v)
			}
		case "verification":
			opts.Verification = nil
			if !null {
				opts.Verification = verification(raw, v)
			}
		case "signature":
			opts.Signature = nil
			if !null {
				opts.Signature = signature(raw, v)
			}
		case "auth":
			opts.Auth = nil
			if !null {
				opts.Auth = authOption(raw, v)
			}
		case "tls":
			opts.TLS = nil
			if !null {
				opts.TLS = tlsOption(raw, v)
			}
		case "destination":
			prev := opts.Destination
			opts.Destination = nil
			if !null {
				opts.Destination = destinationOption(raw, prev, v)
			}
		default:
			v.Add(name, "is not a delivery option")
		}
	}
}

// timeoutSeconds reads a timeout in whole seconds within its bounds.
func timeoutSeconds(raw json.RawMessage, v *sluice.ValidationError) *int {
	var n int
	if err := json.Unmarshal(raw, &n); err != nil || n < sluice.MinTimeoutSeconds || n > sluice.MaxTimeoutSeconds {
		v.Add("timeout_seconds", "must be a whole number of seconds from %d to %d, or null for the server's default",
			sluice.MinTimeoutSeconds, sluice.MaxTimeoutSeconds)
		return nil
	}
	return &n
}

// verification reads a verification mode; VerifyNone is stored as the
// default it is.
func verification(raw json.RawMessage, v *sluice.ValidationError) *string {
	var mode string
	if err := json.Unmarshal(raw, &mode); err != nil || (mode != sluice.VerifyNone && mode != sluice.VerifyChallenge) {
		v.Add("verification", "must be %q or %q", sluice.VerifyNone, sluice.VerifyChallenge)
		return nil
	}
	if mode == sluice.VerifyNone {
		return nil
	}
	return &mode
}

// retrySchedule reads a list of Go durations, each positive, at most
// sluice.MaxRetrySteps of them and sluice.MaxRetryTotal in all.
func retrySchedule(raw json.RawMessage, v *sluice.ValidationError) sluice.Schedule {
	var texts []string
	if err := json.Unmarshal(raw, &texts); err != nil {
		v.Add("retry_schedule", `must be a list of Go durations such as ["30s", "5m", "1h"], or null for the server's default`)
		return nil
	}
	if len(texts) > sluice.MaxRetrySteps {
		v.Add("retry_schedule", "has %d steps; at most %d are allowed", len(texts), sluice.MaxRetrySteps)
		return nil
	}
	out := make(sluice.Schedule, len(texts))
	var total time.Duration
	for i, text := range texts {
		d, err := time.ParseDuration(text)
		if err != nil || d <= 0 {
			v.Add("retry_schedule", "step %d (%q) is not a positive Go duration such as \"30s\" or \"5m\"", i+1, text)
			return nil
		}
		// total stays within MaxRetryTotal before each step, so it cannot overflow.
		out[i], total = d, total+d
		if total > sluice.MaxRetryTotal {
			v.Add("retry_schedule", "waits more than 7 days (168h) in all, the most allowed")
			return nil
		}
	}
	return out
}

// signature reads a signature scheme: sluice.SignatureV1, SignatureV1a or
// SignatureBoth.
func signature(raw json.RawMessage, v *sluice.ValidationError) *string {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || (s != sluice.SignatureV1 && s != sluice.SignatureV1a && s != sluice.SignatureBoth) {
		v.Add("signature", `must be "v1" (HMAC-SHA256), "v1a" (Ed25519) or "v1,v1a" (both), or null for "v1"`)
		return nil
	}
	return &s
}

// changedOptions names the delivery options that differ between before
// and after.
func changedOptions(before, after sluice.DeliveryOptions) []string {
	var out []string
	b, a := reflect.ValueOf(before), reflect.ValueOf(after)
	for i, name := range sluice.DeliveryOptionNames {
		if !reflect.DeepEqual(b.Field(i).Interface(), a.Field(i).Interface()) {
			out = append(out, name)
		}
	}
	return out
}

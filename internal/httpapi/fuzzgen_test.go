package httpapi_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// fuzzGen makes hostile inputs from one seeded source, so a run can be
// repeated exactly.
type fuzzGen struct {
	r   *rand.Rand
	ids []string // real ids of objects, of both tenants
	// endpoints are tenant A's endpoints' ids, for the well-formed writes.
	endpoints []string
	pem       fuzzPEM // real certificates and keys, for the tls option
}

// fuzzPEM is PEM the tls option's rules take apart: a client certificate
// and its key, a CA, an expired certificate and a key of another
// certificate.
type fuzzPEM struct {
	cert, key, ca, expired, otherKey string
}

func (g *fuzzGen) chance(percent int) bool { return g.r.IntN(100) < percent }

func pick[T any](g *fuzzGen, xs ...T) T { return xs[g.r.IntN(len(xs))] }

// text is a string worth trying anywhere text goes.
func (g *fuzzGen) text() string {
	switch g.r.IntN(14) {
	case 0:
		return string(g.bytes(1 + g.r.IntN(40)))
	case 1:
		return "a\x00b"
	case 2:
		return "\xff\xfe"
	case 3:
		return "\xc3\x28 truncated \xe2\x82"
	case 4:
		return strings.Repeat("x", 300+g.r.IntN(5000))
	case 5:
		return strings.Repeat("9", 100)
	case 6:
		return pick(g, "1e999999", "-1", "0", "null", "true", "[]", "{}", "NaN")
	case 7:
		return g.id()
	case 8:
		return pick(g, "", " ", "order.created", "video.*", "*", "dead", "pending", "failed", "delivered")
	case 9:
		return pick(g, "' OR 1=1 --", "../../etc/passwd", "%00", "%ff", "<script>x</script>", "\\u0000")
	case 10:
		return pick(g, "💥🦀", "e\u0301", "\u202e", "\ufeff", "\U0010ffff")
	case 11:
		return pick(g, "2026-01-02T15:04:05Z", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999+14:00", "yesterday")
	case 12:
		return "k-" + fmt.Sprint(g.r.IntN(50))
	default:
		return "https://example.com/" + pick(g, "hook", "\x00", "\xff", "a b", "#frag")
	}
}

func (g *fuzzGen) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.r.UintN(256))
	}
	return b
}

// id is a real id, a random one, or garbage.
func (g *fuzzGen) id() string {
	switch g.r.IntN(10) {
	case 0, 1:
		return uuid.NewString()
	case 2:
		return pick(g, "nope", "00000000-0000-0000-0000-000000000000", "\xff", "a\x00", "1", strings.Repeat("f", 100))
	default:
		return pick(g, g.ids...)
	}
}

// jsonText writes s as a JSON string byte for byte: invalid UTF-8 stays
// invalid (json.Marshal would replace it), and sometimes escapes that no
// database can store are added.
func (g *fuzzGen) jsonText(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	if g.chance(10) {
		b.WriteString(pick(g, `\u0000`, `\ud800`, `\udfff`, `\ud83d\ude00`, `\ud800\u0041`))
	}
	b.WriteByte('"')
	return b.String()
}

// number is a JSON number, sometimes one no machine type holds.
func (g *fuzzGen) number() string {
	return pick(g, "0", "-1", "1", "5", "1.5", "-0", "1e999999", "-1e999999", strings.Repeat("9", 100), "1E400", "100000000000000000000")
}

// value is a JSON value nested at most depth deep.
func (g *fuzzGen) value(depth int) string {
	switch n := g.r.IntN(7); {
	case n == 0 || depth <= 0 && n >= 4:
		return g.jsonText(g.text())
	case n == 1:
		return g.number()
	case n == 2:
		return pick(g, "true", "false", "null")
	case n == 3:
		return g.nested(1 + g.r.IntN(10001))
	case n == 4:
		return "[" + g.values(depth-1) + "]"
	default:
		return g.object(depth - 1)
	}
}

func (g *fuzzGen) values(depth int) string {
	parts := make([]string, g.r.IntN(4))
	for i := range parts {
		parts[i] = g.value(depth)
	}
	return strings.Join(parts, ",")
}

func (g *fuzzGen) object(depth int) string {
	parts := make([]string, g.r.IntN(4))
	for i := range parts {
		parts[i] = g.jsonText(g.text()) + ":" + g.value(depth)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// nested is arrays nested n deep; over 10,000 no JSON decoder here takes.
func (g *fuzzGen) nested(n int) string {
	return strings.Repeat("[", n) + strings.Repeat("]", n)
}

// fields makes a JSON object of some of the named fields (plus, rarely,
// an unknown one), each value made by its generator.
func (g *fuzzGen) fields(gens map[string]func() string) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(gens)) { // in one order, so a seed repeats a run
		if g.chance(85) {
			parts = append(parts, `"`+name+`":`+gens[name]())
		}
	}
	if g.chance(5) {
		parts = append(parts, g.jsonText(g.text())+":"+g.value(1))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// endpoint is the body of an endpoint's create or update: its fields and
// its delivery options, each sometimes valid.
func (g *fuzzGen) endpoint() string {
	return g.fields(map[string]func() string{
		"url": func() string {
			return g.jsonText(pick(g, "https://example.com/hook", "http://127.0.0.1:9/x", g.text()))
		},
		"description": func() string { return g.jsonText(g.text()) },
		"rate_limit": func() string {
			return pick(g, "null", `{"per_second":`+g.number()+`}`, `{"per_minute":`+g.number()+`,"burst":`+g.number()+`}`, g.value(1))
		},
		"max_in_flight": g.number,
		"headers":       func() string { return "{" + g.jsonText(g.text()) + ":" + g.jsonText(g.text()) + "}" },
		"disabled":      func() string { return pick(g, "true", "false", g.value(0)) },
		"delivery":      func() string { return pick(g, `"push"`, `"poll"`, g.value(0)) },

		"timeout_seconds": func() string { return pick(g, "null", g.number(), g.value(0)) },
		"retry_schedule":  g.retrySchedule,
		"auth":            g.auth,
		"tls":             g.tls,
		"signature":       func() string { return pick(g, "null", `"v1"`, `"v1a"`, `"v1,v1a"`, `"v1a,v1"`, `"v2"`, g.value(0)) },
		"verification":    func() string { return pick(g, "null", `"none"`, `"challenge"`, `"Challenge"`, g.value(0)) },
		"destination":     g.destination,
	})
}

// validEndpoint is an endpoint's create or update body that passes every
// rule, with one to three delivery options set (so the options are
// stored, sealed and acted on, not only refused), or, half the time, all
// but one field valid.
func (g *fuzzGen) validEndpoint() string {
	valid := map[string]func() string{
		"timeout_seconds": func() string { return pick(g, "1", "60", "null") },
		"retry_schedule":  func() string { return pick(g, `["1s", "5m"]`, "[]", "null") },
		"auth": func() string {
			return `{"type": "oauth2_client_credentials", "token_url": "http://127.0.0.1:9/token", "client_id": "sluice", "client_secret": "s3cret"` +
				pick(g, "", `, "scope": "hooks"`, `, "audience": "https://api.example"`) + "}"
		},
		"tls": func() string {
			ca := ""
			if g.chance(50) {
				ca = `, "ca_certificates": ` + g.jsonText(g.pem.ca)
			}
			return `{"client_certificate": ` + g.jsonText(g.pem.cert) + `, "client_key": ` + g.jsonText(g.pem.key) + ca + "}"
		},
		"signature":    func() string { return pick(g, `"v1"`, `"v1a"`, `"v1,v1a"`) },
		"verification": func() string { return pick(g, `"none"`, `"challenge"`) },
		"destination":  func() string { return "null" }, // a destination excludes url: TestDestinationFields
	}
	hostile := map[string]func() string{
		"timeout_seconds": g.number, "retry_schedule": g.retrySchedule, "auth": g.auth, "tls": g.tls,
		"signature": func() string { return g.value(0) }, "verification": func() string { return g.value(0) },
		"destination": g.destination,
	}
	gens := map[string]func() string{"url": func() string { return `"http://127.0.0.1:9/x"` }}
	if g.chance(20) { // a poll endpoint: no url; auth, tls, v1a and a challenge are refused
		gens = map[string]func() string{"delivery": func() string { return `"poll"` }}
	}
	names := slices.Sorted(maps.Keys(valid))
	for range 1 + g.r.IntN(3) {
		name := pick(g, names...)
		gens[name] = valid[name]
	}
	if g.chance(50) {
		name := pick(g, names...)
		gens[name] = hostile[name]
	}
	parts := make([]string, 0, len(gens))
	for _, name := range slices.Sorted(maps.Keys(gens)) {
		parts = append(parts, `"`+name+`":`+gens[name]())
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// retrySchedule is a retry_schedule option: a list of Go durations,
// sometimes too long, too large in all, negative or not durations.
func (g *fuzzGen) retrySchedule() string {
	if g.chance(15) {
		return pick(g, "null", "[]", `"5s"`, g.value(1))
	}
	steps := make([]string, g.r.IntN(25))
	for i := range steps {
		steps[i] = g.jsonText(pick(g, "30s", "5m", "1h30m", "0s", "-5s", "169h", "2562047h", "1.5h", "1e9h", "5", "", g.text()))
	}
	return "[" + strings.Join(steps, ",") + "]"
}

// auth is an auth option: OAuth2 client credentials with each field
// sometimes missing, of the wrong type or hostile.
func (g *fuzzGen) auth() string {
	if g.chance(15) {
		return pick(g, "null", `"oauth2"`, "[]", g.value(1))
	}
	return g.fields(map[string]func() string{
		"type": func() string {
			return pick(g, `"oauth2_client_credentials"`, `"oauth2_password"`, g.value(0))
		},
		"token_url": func() string {
			return g.jsonText(pick(g, "http://127.0.0.1:9/token", "https://example.com/token", "http://169.254.169.254/token", "ftp://example.com/t", g.text()))
		},
		"client_id":     func() string { return pick(g, `"sluice"`, g.jsonText(g.text()), g.value(0)) },
		"client_secret": func() string { return pick(g, `"s3cret"`, g.jsonText(g.text()), g.value(0)) },
		"scope":         func() string { return g.jsonText(g.text()) },
		"audience":      func() string { return g.jsonText(g.text()) },
	})
}

// tls is a tls option: real certificates and keys, mismatched, expired,
// cut short or not PEM at all.
// destination is a destination option, valid or not.
func (g *fuzzGen) destination() string {
	return pick(g, "null", `"redis"`, g.value(1),
		`{"type": "redis", "url": "redis://:pw@127.0.0.1:6379/0", "stream": `+g.jsonText(g.text())+`}`,
		`{"type": "nats", "url": `+g.jsonText(g.text())+`, "subject": "a.b"}`,
		`{"type": "amqp", "url": "amqp://127.0.0.1", "exchange": "x"}`,
		`{"type": "redis", "url": "redis://127.0.0.1", "max_len": `+g.number()+`, "stream": "s"}`)
}

func (g *fuzzGen) tls() string {
	if g.chance(15) {
		return pick(g, "null", `"on"`, "[]", g.value(1))
	}
	pem := func(real ...string) func() string {
		return func() string {
			switch g.r.IntN(4) {
			case 0:
				return g.jsonText(g.text())
			case 1:
				s := pick(g, real...)
				return g.jsonText(s[:g.r.IntN(len(s)+1)])
			default:
				return g.jsonText(pick(g, real...))
			}
		}
	}
	return g.fields(map[string]func() string{
		"client_certificate": pem(g.pem.cert, g.pem.expired, g.pem.ca, g.pem.cert+g.pem.ca),
		"client_key":         pem(g.pem.key, g.pem.otherKey, g.pem.cert),
		"ca_certificates":    pem(g.pem.ca, g.pem.cert, g.pem.ca+g.pem.ca),
	})
}

func (g *fuzzGen) event() string {
	return g.fields(map[string]func() string{
		"type": func() string {
			return g.jsonText(pick(g, "order.created", "user.x", g.text()))
		},
		"payload": func() string {
			if g.chance(70) {
				return g.object(3)
			}
			return g.value(2)
		},
		"coalesce_key": func() string { return g.jsonText(g.text()) },
	})
}

// body is a request body: usually one shaped for a route, or anything.
func (g *fuzzGen) body() []byte {
	switch g.r.IntN(16) {
	case 0, 1, 2:
		return []byte(g.event())
	case 3:
		evs := make([]string, 1+g.r.IntN(5))
		for i := range evs {
			evs[i] = g.event()
		}
		return []byte(`{"events":[` + strings.Join(evs, ",") + `]}`)
	case 4, 5:
		return []byte(g.endpoint())
	case 6:
		return []byte(g.fields(map[string]func() string{
			"endpoint_id": func() string { return g.jsonText(g.id()) },
			"event_types": func() string { return "[" + g.jsonText(g.text()) + "," + g.jsonText("order.*") + "]" },
		}))
	case 7:
		return []byte(g.fields(map[string]func() string{
			"status": func() string { return g.jsonText(g.text()) },
			"since":  func() string { return g.jsonText(g.text()) },
			"until":  func() string { return g.jsonText(g.text()) },
		}))
	case 8:
		return g.bytes(g.r.IntN(200))
	case 9:
		return []byte(g.nested(10000 + g.r.IntN(2)))
	case 10:
		return []byte(`{"type":"a","payload":{"a":` + g.nested(9990) + `}}`)
	case 11:
		return []byte(pick(g, "", "null", "1e999999", strings.Repeat("9", 100), `{"type":"a","payload":{}}{}`, "{\"type\":\"a\xff\",\"payload\":{}}"))
	default:
		return []byte(g.value(3))
	}
}

// query is a query string of list parameters with hostile values.
func (g *fuzzGen) query() string {
	if g.chance(5) {
		return pick(g, "%zz", "a=%", "limit=1&limit=2", "=x", "%ff=1", "a%00=1", ";")
	}
	q := url.Values{}
	for range g.r.IntN(4) {
		name := pick(g, "limit", "cursor", "type", "status", "endpoint_id", "event_id", "queued", "replayed", "next", g.text())
		var v string
		switch name {
		case "limit":
			v = pick(g, "0", "-1", "1", "500", "501", "1e999999", strings.Repeat("9", 100), "abc", g.text())
		case "cursor":
			v = pick(g, "!!!", "AAAA", "AAAAAAAAAAAAAAAAAAAAAA", g.id(), g.text(), string(g.bytes(22)))
		default:
			v = g.text()
		}
		q.Add(name, v)
	}
	return q.Encode()
}

// form is a dashboard form body: usually with the session's CSRF token.
func (g *fuzzGen) form(csrf string) []byte {
	if g.chance(5) {
		return g.bytes(g.r.IntN(100))
	}
	f := url.Values{}
	if g.chance(85) {
		f.Set("csrf_token", csrf)
	}
	for range g.r.IntN(4) {
		f.Set(pick(g, "status", "since", "until", "from", "api_key", "next", g.text()), g.text())
	}
	// The endpoint form's delivery options, each as typed.
	for range g.r.IntN(3) {
		name := pick(g, sluice.DeliveryOptionFields...)
		switch name {
		case "tls.client_certificate":
			f.Set(name, pick(g, g.pem.cert, g.pem.expired, g.text()))
		case "tls.client_key":
			f.Set(name, pick(g, g.pem.key, g.pem.otherKey, g.text()))
		case "tls.ca_certificates":
			f.Set(name, pick(g, g.pem.ca, g.text()))
		default:
			f.Set(name, pick(g, "", "5", "61", "30s, 5m", "v1a", "v1,v1a", "challenge", "http://127.0.0.1:9/token", g.text()))
		}
	}
	return []byte(f.Encode())
}

// contentType is usually right for the body.
func (g *fuzzGen) contentType(right string) string {
	if g.chance(80) {
		return right
	}
	return pick(g, "", "text/plain", "application/json; charset=latin1", "multipart/form-data; boundary=x",
		"application/x-www-form-urlencoded", "application/json", "\xff/\x00")
}

package send

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"code.dny.dev/ssrf"
)

// maxRetryAfter caps a parsed Retry-After only to keep absurd values sane;
// callers apply their own policy on top.
const maxRetryAfter = 30 * 24 * time.Hour

// Result is the outcome of one attempt.
type Result struct {
	At         time.Time     // when the attempt started
	StatusCode int           // 0 when no response arrived
	Err        string        // "" on 2xx; otherwise a short human message ("status 500", "timeout after 10s", ...)
	Latency    time.Duration // from start until the response head and logged body were read, or the error
	Body       string        // first 1 KiB of the response body as valid UTF-8 without NULs, "" if none
	RetryAfter time.Duration // parsed Retry-After of any response, relative to its arrival; 0 if absent, invalid or past
	// Confirmed: a broker destination took the message (its confirm or
	// ack). Backpressure: it refused it for now (out of memory, a full
	// stream, a blocked connection). StatusCode stays 0 for a broker.
	Confirmed, Backpressure bool
}

// Delivered reports whether the endpoint answered 2xx, or its broker
// confirmed the message.
func (r Result) Delivered() bool { return r.Confirmed || r.StatusCode >= 200 && r.StatusCode < 300 }

// Throttled reports whether the endpoint answered 429 Too Many Requests,
// or its broker pushed back.
func (r Result) Throttled() bool { return r.StatusCode == http.StatusTooManyRequests || r.Backpressure }

// TimedOut reports whether no response arrived in time (describeErr's
// "timeout" and "deadline exceeded").
func (r Result) TimedOut() bool {
	return r.StatusCode == 0 && (strings.HasPrefix(r.Err, "timeout") || r.Err == "deadline exceeded")
}

// describeErr maps a transport error (no response) to a short message.
func describeErr(err error) string {
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	switch {
	case errors.Is(err, ErrMetadataAddr):
		return "destination address is not allowed (cloud metadata)"
	case errors.Is(err, ssrf.ErrProhibitedIP):
		return "destination address is not allowed (private/loopback)"
	case errors.Is(err, ssrf.ErrProhibitedNetwork), errors.Is(err, ssrf.ErrProhibitedPort), errors.Is(err, ssrf.ErrInvalidHostPort):
		return "destination is not allowed"
	case errors.Is(err, errProxy):
		return trimURLErr(err)
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded"
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return "dns: host not found: " + dnsErr.Name
		}
		return "dns lookup failed: " + dnsErr.Name
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset by peer"
	case errors.Is(err, syscall.ENETUNREACH):
		return "network unreachable"
	case errors.Is(err, syscall.EHOSTUNREACH):
		return "host unreachable"
	case errors.As(err, &certErr):
		return "tls: certificate verification failed: " + trimURLErr(certErr.Err)
	case errors.As(err, &recErr):
		return "tls: server did not answer TLS (plain HTTP on an https URL?)"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed before a response"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout: " + trimURLErr(err)
	}
	return trimURLErr(err)
}

// parseRetryAfter reads delta-seconds or an HTTP-date relative to now.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		if n > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		return time.Duration(n) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	d := t.Sub(now)
	if d <= 0 {
		return 0
	}
	return min(d, maxRetryAfter)
}

// cleanBody makes b safe to store as Postgres text: valid UTF-8, no NULs,
// at most bodyLimit bytes, never ending in a split rune.
func cleanBody(b []byte) string {
	// A rune cut by the read limit is dropped rather than turned into U+FFFD.
	if i := lastRuneStart(b); i >= 0 && !utf8.FullRune(b[i:]) {
		b = b[:i]
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	for len(s) > bodyLimit { // replacements can grow the string
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

// lastRuneStart is the index of the start byte of the last (possibly
// incomplete) rune within the final utf8.UTFMax bytes, or -1.
func lastRuneStart(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return -1
}

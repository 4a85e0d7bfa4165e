// Package send sends one signed webhook (a Standard Webhooks POST) to an
// endpoint and reports what happened: status, latency, the first KiB of the
// response, a parsed Retry-After and a short human error message.
//
// A Sender holds one shared HTTP client whose connections are reused across
// sends. Redirects are never followed, and unless Config.AllowPrivate is set
// every dialled address is checked at connect time so that loopback, private,
// link-local, metadata and other special-purpose addresses are refused (SSRF
// guard; DNS rebinding cannot slip past it because the check sees the IP that
// is actually dialled). With an egress proxy (Config.EgressProxy) every
// attempt leaves through it, and the same check holds: Sluice resolves the
// name and hands the proxy the checked IP (egress). An endpoint with a
// client certificate (Message.TLS) is sent with a client of its own,
// built once per endpoint version (tlsClients).
package send

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/tracing"
)

// Defaults applied by New for zero Config fields.
const (
	DefaultTimeout             = 10 * time.Second
	DefaultUserAgent           = "Sluice-Webhooks/1.0 (+https://sluice.dev)"
	DefaultMaxIdleConnsPerHost = 100
)

const (
	bodyLimit  = 1 << 10  // response bytes kept for the log
	drainLimit = 64 << 10 // further bytes read so the connection can be reused
)

// Config configures a Sender. Zero fields take the defaults above.
type Config struct {
	Timeout             time.Duration // whole-request timeout (SLUICE_DELIVERY_TIMEOUT), default 10s
	AllowPrivate        bool          // SLUICE_ALLOW_PRIVATE_TARGETS: allow loopback and private addresses
	UserAgent           string        // default DefaultUserAgent
	MaxIdleConnsPerHost int           // default 100
	// EgressProxy, when set (SLUICE_EGRESS_PROXY: http://host:port), is
	// where every attempt leaves from (egress).
	EgressProxy *url.URL
	// Resolver resolves receivers' names when EgressProxy is set (default
	// net.DefaultResolver); without a proxy the dialer resolves them.
	Resolver Resolver
}

// Sender sends webhooks. It is safe for concurrent use; create one and share it.
type Sender struct {
	client    *http.Client
	timeout   time.Duration
	userAgent string
	// https is the transport of https attempts, which an endpoint's own
	// client (tlsClients) clones with its certificate.
	https *http.Transport
	tls   tlsClients
	// brokers are the broker destinations (Message.Destination), each
	// with its pooled connections, dialled through the same guard.
	brokers *brokers
}

// privateV4 and privateV6 are the ranges AllowPrivate opens. Cloud
// metadata addresses (IsMetadataAddr, fd00:ec2::254 inside fc00::/7
// included), link-local and the other special ranges stay refused even
// then.
var (
	privateV4 = []netip.Prefix{
		netip.MustParsePrefix("127.0.0.0/8"),
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.168.0.0/16"),
	}
	privateV6 = []netip.Prefix{
		netip.MustParsePrefix("::1/128"),
		netip.MustParsePrefix("fc00::/7"),
	}
)

// New returns a Sender with one shared keep-alive HTTP client.
func New(cfg Config) *Sender {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultUserAgent
	}
	if cfg.MaxIdleConnsPerHost <= 0 {
		cfg.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	g := newGuard(cfg.AllowPrivate)
	dialer := &net.Dialer{KeepAlive: 30 * time.Second, Control: g.control}
	transport := &http.Transport{
		Proxy:                  nil, // a proxy would dial on our behalf and bypass the guard: egress asks it for checked IPs
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConnsPerHost:    cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	var rt http.RoundTripper = transport
	if cfg.EgressProxy != nil {
		resolver := cfg.Resolver
		if resolver == nil {
			resolver = net.DefaultResolver
		}
		rt = newEgress(cfg.EgressProxy, g, resolver, transport)
	}
	return &Sender{
		client:    newClient(rt),
		timeout:   cfg.Timeout,
		userAgent: cfg.UserAgent,
		https:     transport,
		tls:       tlsClients{m: map[uuid.UUID]*tlsClient{}},
		brokers:   &brokers{dial: dialer.DialContext, m: map[brokerKey]destination{}},
	}
}

// Close closes the connections the Sender holds to brokers.
func (s *Sender) Close() { s.brokers.close() }

// newClient is an HTTP client on rt that follows no redirect.
func newClient(rt http.RoundTripper) *http.Client {
	return &http.Client{
		Transport: rt,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// Message is one webhook to send.
type Message struct {
	URL       string
	ID        string    // webhook-id (event id)
	Timestamp time.Time // webhook-timestamp (this attempt); zero means now
	Body      []byte    // already-marshalled JSON body
	// Parts, when Body is nil, is the body in pieces, sent and signed one
	// after another: a large payload, which the deliveries of its event in
	// flight share, between its envelope's head and tail. An HTTP attempt
	// never joins them; a broker's message joins them once.
	Parts    [][]byte
	Keys     [][]byte          // HMAC keys (decoded secrets); one v1 signature each, space-separated
	Headers  map[string]string // endpoint's static extra headers; cannot override reserved ones
	Sequence int64             // webhook-sequence, on a FIFO endpoint's delivery; 0: none
	Timeout  time.Duration     // bounds the attempt; 0: Config.Timeout

	// SigningKeys are the endpoint's Ed25519 keys: one v1a signature each,
	// after the v1 ones.
	SigningKeys []ed25519.PrivateKey
	TLS         *ClientTLS // the endpoint's client certificate, for an https URL; nil: none
	// Bearer is the endpoint's OAuth2 access token, sent as
	// "Authorization: Bearer"; "": none.
	Bearer string
	// Destination is the broker the message goes to instead of URL,
	// with its FullURL opened; nil: URL.
	Destination *sluice.Destination
}

var errTimeout = errors.New("sender: request timeout")

// Send makes one attempt to deliver m, to its URL or its Destination, and
// reports the outcome. It never returns an error: failures are described
// in Result.Err. If ctx is cancelled (for example at shutdown) the
// attempt fails with Err "canceled"; callers can tell that apart by
// checking ctx.Err(). When ctx holds a span (a traced attempt), an HTTP
// request carries its W3C traceparent and tracestate.
func (s *Sender) Send(ctx context.Context, m Message) Result {
	ctx, cancel := context.WithTimeoutCause(ctx, cmp.Or(m.Timeout, s.timeout), errTimeout)
	defer cancel()
	if m.Destination != nil {
		if m.Body == nil {
			m.Body = bytes.Join(m.Parts, nil)
		}
		return s.brokers.deliver(ctx, m)
	}
	return s.post(ctx, m)
}

// post is the HTTP destination: one signed POST to m.URL.
func (s *Sender) post(ctx context.Context, m Message) Result {
	start := time.Now()
	res := Result{At: start}

	req, err := s.newRequest(ctx, m, start)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	client := s.client
	if m.TLS != nil && req.URL.Scheme == "https" {
		if client, err = s.tls.client(s.https, m.TLS); err != nil {
			res.Err = err.Error()
			return res
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		res.Latency = time.Since(start)
		res.Err = s.describe(ctx, err)
		return res
	}
	defer resp.Body.Close()

	res.StatusCode = resp.StatusCode
	res.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	head, _ := io.ReadAll(io.LimitReader(resp.Body, bodyLimit))
	res.Latency = time.Since(start)
	res.Body = cleanBody(head)
	_, _ = io.CopyN(io.Discard, resp.Body, drainLimit)
	res.Err = statusErr(resp.StatusCode)
	return res
}

func (s *Sender) newRequest(ctx context.Context, m Message, now time.Time) (*http.Request, error) {
	u, err := url.Parse(m.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("invalid URL: must be an absolute http or https URL")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.URL, bytes.NewReader(m.Body))
	if err != nil {
		return nil, errors.New("invalid URL: " + err.Error())
	}
	body := [][]byte{m.Body}
	if m.Body == nil {
		body = m.Parts
		setBody(req, m.Parts)
	}
	// In name order, so that of two names differing only in case (stored
	// before the API refused that) the same one wins every time.
	for _, k := range slices.Sorted(maps.Keys(m.Headers)) {
		if !IsReservedHeader(k) {
			req.Header.Set(k, m.Headers[k])
		}
	}
	ts := m.Timestamp
	if ts.IsZero() {
		ts = now
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.userAgent)
	req.Header.Set("Webhook-Id", m.ID)
	req.Header.Set("Webhook-Timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("Webhook-Signature", signatures(m.Keys, m.SigningKeys, m.ID, ts.Unix(), body...))
	setSequence(req.Header, m.Sequence)
	if m.Bearer != "" {
		req.Header.Set("Authorization", "Bearer "+m.Bearer)
	}
	// The attempt's span, when it is traced (dispatch's trace.go).
	tracing.Inject(ctx, req.Header)
	return req, nil
}

// setBody makes req's body parts, read one after another.
func setBody(req *http.Request, parts [][]byte) {
	req.GetBody = func() (io.ReadCloser, error) {
		readers := make([]io.Reader, len(parts))
		for i, p := range parts {
			readers[i] = bytes.NewReader(p)
		}
		return io.NopCloser(io.MultiReader(readers...)), nil
	}
	req.Body, _ = req.GetBody()
	req.ContentLength = 0
	for _, p := range parts {
		req.ContentLength += int64(len(p))
	}
	if req.ContentLength == 0 {
		req.Body, req.GetBody = http.NoBody, nil
	}
}

// statusErr is the Err for a response status: "" for 2xx.
func statusErr(code int) string {
	switch {
	case code >= 200 && code < 300:
		return ""
	case code >= 300 && code < 400:
		return "redirect (" + strconv.Itoa(code) + ") not followed"
	default:
		return "status " + strconv.Itoa(code)
	}
}

// describe turns a transport error into a short message.
func (s *Sender) describe(ctx context.Context, err error) string {
	if errors.Is(context.Cause(ctx), errTimeout) {
		return "timeout after " + s.timeout.String()
	}
	return describeErr(err)
}

// trimURLErr drops the `Post "https://...": ` prefix of a *url.Error.
func trimURLErr(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	if len(msg) > 200 {
		msg = strings.ToValidUTF8(msg[:200], "") + "..."
	}
	return msg
}

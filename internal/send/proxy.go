package send

import (
	"bufio"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"time"
)

// Resolver looks up a name's addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// errProxy marks what the egress proxy answered or failed to, so a
// delivery's error says the proxy, not the receiver, failed.
var errProxy = errors.New("egress proxy")

// egress sends every attempt through the egress proxy
// (SLUICE_EGRESS_PROXY) without letting the proxy resolve a name: it
// resolves the receiver's name itself, checks the address with the guard
// and hands the proxy the checked IP. An https attempt goes through a
// CONNECT tunnel to that IP (tunnel), TLS inside it with the receiver's
// name as SNI, so its certificate is still checked against the name; an
// http attempt is sent to the proxy in absolute form, http://<ip>:<port>,
// with Host the name (forward). The proxy's own address is the
// operator's choice and is not checked as a receiver's.
type egress struct {
	proxy    *url.URL
	addr     string // the proxy's host:port
	auth     string // Proxy-Authorization for a proxy URL with a user, "" without
	guard    guard
	resolver Resolver
	dialer   net.Dialer      // dials the proxy
	tunnel   *http.Transport // https: CONNECT <ip>:<port>
	forward  *http.Transport // http: absolute form to the proxy
}

// newEgress returns the round tripper that sends through proxy. base is
// the Sender's transport: it becomes the tunnel (its dial asks the proxy
// for a tunnel), and a clone of it that dials only the proxy the forward.
func newEgress(proxy *url.URL, g guard, resolver Resolver, base *http.Transport) *egress {
	e := &egress{
		proxy: proxy, addr: canonicalHostPort(proxy), guard: g, resolver: resolver,
		dialer: net.Dialer{KeepAlive: 30 * time.Second},
	}
	if u := proxy.User; u != nil {
		pass, _ := u.Password()
		e.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pass))
	}
	e.forward = base.Clone()
	e.forward.Proxy = http.ProxyURL(proxy) // http requests only (RoundTrip): it never tunnels
	e.forward.DialContext = e.dialProxy
	e.tunnel = base
	e.tunnel.DialContext = e.dialTunnel
	return e
}

// canonicalHostPort is u's host:port, port 80 when it names none.
func canonicalHostPort(u *url.URL) string {
	return net.JoinHostPort(u.Hostname(), cmp.Or(u.Port(), "80"))
}

// RoundTrip sends an http request through the proxy in absolute form to
// the checked IP, and an https one through a tunnel to it (dialTunnel).
func (e *egress) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" {
		return e.tunnel.RoundTrip(req) //nolint:wrapcheck // the transport's error, described by describeErr
	}
	ap, err := e.checkedAddr(req.Context(), req.URL.Hostname(), cmp.Or(req.URL.Port(), "80"))
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, even on an error
		}
		return nil, err
	}
	out := req.Clone(req.Context())
	out.Host = cmp.Or(req.Host, req.URL.Host) // the Host header keeps the name
	out.URL.Host = ap.String()
	// An opaque URL is written as is on the request line: the proxy reads
	// http://<ip>:<port>/path, never the name the Host header carries.
	out.URL.Opaque = "//" + ap.String() + req.URL.EscapedPath()
	return e.forward.RoundTrip(out) //nolint:wrapcheck // the transport's error, described by describeErr
}

// dialProxy dials the proxy: the forward transport dials nothing else.
func (e *egress) dialProxy(ctx context.Context, network, _ string) (net.Conn, error) {
	conn, err := e.dialer.DialContext(ctx, network, e.addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errProxy, err)
	}
	return conn, nil
}

// dialTunnel resolves and checks addr's host, then asks the proxy for a
// tunnel to the checked IP. An address the guard refuses fails before the
// proxy is dialled.
func (e *egress) dialTunnel(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("split %q: %w", addr, err)
	}
	ap, err := e.checkedAddr(ctx, host, port)
	if err != nil {
		return nil, err
	}
	conn, err := e.dialProxy(ctx, network, "")
	if err != nil {
		return nil, err
	}
	if err := e.connect(ctx, conn, ap); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}

// connect asks the proxy on conn for a tunnel to ap and reads its answer,
// within ctx.
func (e *egress) connect(ctx context.Context, conn net.Conn, ap netip.AddrPort) error {
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	target := ap.String()
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if e.auth != "" {
		req += "Proxy-Authorization: " + e.auth + "\r\n"
	}
	if _, err := conn.Write([]byte(req + "\r\n")); err != nil {
		return fmt.Errorf("%w: CONNECT %s: %w", errProxy, target, cmp.Or(context.Cause(ctx), err))
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return fmt.Errorf("%w: CONNECT %s: %w", errProxy, target, cmp.Or(context.Cause(ctx), err))
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: CONNECT %s answered %s", errProxy, target, resp.Status)
	}
	if br.Buffered() > 0 { // bytes past the answer: nothing can be sent before the TLS hello
		return fmt.Errorf("%w: CONNECT %s: data after the answer", errProxy, target)
	}
	_ = conn.SetDeadline(time.Time{})
	return nil
}

// checkedAddr is the first address of host (an IP, or a name it resolves)
// that the guard allows, with port; the guard's error when it allows none.
func (e *egress) checkedAddr(ctx context.Context, host, port string) (netip.AddrPort, error) {
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %q: %w", port, err)
	}
	addrs, err := e.lookup(ctx, host)
	if err != nil {
		return netip.AddrPort{}, err
	}
	var refused error
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		if err := e.guard.check(a); err != nil {
			refused = cmp.Or(refused, err)
			continue
		}
		return netip.AddrPortFrom(a, uint16(p)), nil
	}
	if refused == nil {
		return netip.AddrPort{}, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return netip.AddrPort{}, fmt.Errorf("check %s: %w", host, refused)
}

// lookup is host's addresses: itself when it is an IP.
func (e *egress) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	addrs, err := e.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	return addrs, nil
}

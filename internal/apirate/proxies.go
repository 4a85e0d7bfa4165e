package apirate

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// Behind a reverse proxy or load balancer every connection comes from the
// proxy. TrustProxies finds the client behind it, for every door alike
// (API, dashboard, portal): the address its failed authentications are
// counted against (ClientPrefix), the audit log's source_ip, and whether
// it reached the proxy over https (ForwardedHTTPS, for Secure cookies).
// Forwarding headers are believed only from the proxies named
// (SLUICE_TRUSTED_PROXIES): anyone else could send them.

// TrustProxies returns next behind the resolution of the client's address.
// A request whose peer (r.RemoteAddr) is in trusted has its forwarding
// headers read: X-Forwarded-For with X-Forwarded-Proto, what nearly every
// proxy sets, or Forwarded (RFC 7239) when there is no X-Forwarded-For (a
// proxy passes on the one it does not set as the client wrote it: it must
// remove it, docs/reverse-proxy.md). The client is the right-most address of the
// chain that is not itself in trusted (each proxy appends the address it
// was reached from; entries left of an untrusted one may be anything the
// client wrote), and r.RemoteAddr becomes it. The protocol is the one
// given with that address. Any other request passes unchanged, its headers
// unread. With trusted empty, next is returned as is.
func TrustProxies(trusted []netip.Prefix, next http.Handler) http.Handler {
	if len(trusted) == 0 {
		return next
	}
	p := proxies(trusted)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client, https, ok := p.resolve(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		ctx := r.Context()
		if https {
			ctx = context.WithValue(ctx, forwardedHTTPSKey{}, true)
		}
		r = r.WithContext(ctx) // a shallow copy: the caller's request is left as it was
		r.RemoteAddr = client.String()
		next.ServeHTTP(w, r)
	})
}

// ForwardedHTTPS reports whether a trusted proxy said the client reached
// it over https (TrustProxies).
func ForwardedHTTPS(r *http.Request) bool {
	v, _ := r.Context().Value(forwardedHTTPSKey{}).(bool)
	return v
}

type forwardedHTTPSKey struct{}

// proxies are the trusted proxies' networks.
type proxies []netip.Prefix

func (p proxies) trusts(a netip.Addr) bool {
	for _, pfx := range p {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

// hop is one entry of a forwarding chain: the address a proxy was reached
// from (invalid when the proxy did not say, or said "unknown"), and the
// protocol it was reached over ("" when not said).
type hop struct {
	addr  netip.AddrPort
	proto string
}

// resolve finds the client of a request from a trusted peer; ok is false
// when the peer is not trusted or its headers name no client.
func (p proxies) resolve(r *http.Request) (client netip.AddrPort, https bool, ok bool) {
	peer, ok := parseHost(r.RemoteAddr)
	if !ok || !p.trusts(peer.Addr()) {
		return netip.AddrPort{}, false, false
	}
	var chain []hop
	if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
		chain = parseXForwarded(xff, r.Header.Values("X-Forwarded-Proto"))
	} else if fwd := r.Header.Values("Forwarded"); len(fwd) > 0 {
		chain = parseForwarded(fwd)
	} else {
		chain = parseXForwarded(nil, r.Header.Values("X-Forwarded-Proto"))
	}
	if len(chain) == 0 {
		return netip.AddrPort{}, false, false
	}
	// From the right: each trusted hop vouches for the entry left of it.
	// An entry that is no address ("unknown", an obfuscated name) leaves
	// the last address vouched for: the proxy that could not say.
	client = peer
	for i := len(chain) - 1; i >= 0; i-- {
		h := chain[i]
		if !h.addr.IsValid() {
			return client, isHTTPS(h.proto), true
		}
		client = h.addr
		if !p.trusts(client.Addr()) {
			return client, isHTTPS(h.proto), true
		}
	}
	// Every hop is trusted: the left-most is as far as the chain goes.
	return client, isHTTPS(chain[0].proto), true
}

func isHTTPS(proto string) bool { return strings.EqualFold(proto, "https") }

// parseHost reads an address with or without a port: 192.0.2.7,
// 192.0.2.7:443, 2001:db8::1, [2001:db8::1]:443. IPv4-mapped IPv6
// addresses are unmapped.
func parseHost(s string) (netip.AddrPort, bool) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port()), true
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); err == nil {
		return netip.AddrPortFrom(a.Unmap().WithZone(""), 0), true
	}
	// A port that is not a number (RFC 7239's obfuscated ports).
	if host, _, err := net.SplitHostPort(s); err == nil {
		if a, err := netip.ParseAddr(host); err == nil {
			return netip.AddrPortFrom(a.Unmap().WithZone(""), 0), true
		}
	}
	return netip.AddrPort{}, false
}

// parseXForwarded reads X-Forwarded-For (every line, comma-separated) with
// X-Forwarded-Proto: the protocol at the same position when it lists one
// per address, otherwise its right-most one, set by the nearest proxy.
// A hop's address is invalid when it is not one ("unknown").
func parseXForwarded(fors, protos []string) []hop {
	addrs := splitList(fors)
	ps := splitList(protos)
	if len(addrs) == 0 && len(ps) > 0 {
		return []hop{{proto: ps[len(ps)-1]}} // the protocol alone: the peer is the client
	}
	chain := make([]hop, len(addrs))
	for i, a := range addrs {
		chain[i].addr, _ = parseHost(a)
		switch {
		case len(ps) == len(addrs):
			chain[i].proto = ps[i]
		case len(ps) > 0:
			chain[i].proto = ps[len(ps)-1]
		}
	}
	return chain
}

func splitList(lines []string) []string {
	var out []string
	for _, line := range lines {
		for part := range strings.SplitSeq(line, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

// parseForwarded reads Forwarded header lines (RFC 7239): elements
// separated by commas, each of name=value pairs separated by semicolons,
// a value a token or a quoted string. Each element is one hop, its for=
// and proto= read; a malformed element is a hop with no address.
func parseForwarded(lines []string) []hop {
	var chain []hop
	for _, line := range lines {
		for _, elem := range splitQuoted(line, ',') {
			if strings.TrimSpace(elem) == "" {
				continue
			}
			var h hop
			for _, pair := range splitQuoted(elem, ';') {
				name, value, found := strings.Cut(strings.TrimSpace(pair), "=")
				if !found {
					continue
				}
				value = unquote(strings.TrimSpace(value))
				switch strings.ToLower(strings.TrimSpace(name)) {
				case "for":
					h.addr, _ = parseHost(value)
				case "proto":
					h.proto = value
				}
			}
			chain = append(chain, h)
		}
	}
	return chain
}

// splitQuoted splits s at sep outside double-quoted strings.
func splitQuoted(s string, sep byte) []string {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == sep && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// unquote is a quoted string's content, or s itself when it is a token.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s[1 : len(s)-1]
}

package dashboard

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"

	"github.com/sluice-dev/sluice/internal/apirate"
)

// signInRate is how often one client address may try to sign in: 10 tries
// a minute, all 10 at once if it likes.
var signInRate = apirate.MustParse("10/m").WithBurst(10)

// signInKey is a client address (an IPv6 one by its /64) at one Dashboard.
type signInKey struct {
	d    *Dashboard
	addr netip.Prefix
}

// signInBuckets holds the sign-in buckets of every Dashboard of the process,
// each keyed by its Dashboard as well, so two never share one. Buckets that
// have refilled are dropped, so it holds only addresses seen in the last
// minute or so.
var signInBuckets = apirate.NewLimiter[signInKey](nil)

// limitSignIn charges a sign-in try to the client's address, or answers 429
// with Retry-After once it has used up its tries. The address is the
// connection's peer: behind a proxy every client shares the proxy's.
func (d *Dashboard) limitSignIn(r *http.Request) error {
	res := signInBuckets.Take(signInKey{d: d, addr: clientPrefix(r.RemoteAddr)}, signInRate, 1)
	if res.Allowed {
		return nil
	}
	after := max(1, apirate.Seconds(res.RetryAfter))
	return &pageError{status: http.StatusTooManyRequests, title: "Too many sign-in attempts",
		detail: fmt.Sprintf("This address has tried to sign in too often. Try again in %d seconds.", after), retryAfter: after}
}

// clientPrefix is the address a sign-in is counted against: the whole
// IPv4 address, or the /64 of an IPv6 one (one host's usual allotment).
func clientPrefix(remoteAddr string) netip.Prefix {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}
	}
	addr = addr.Unmap()
	bits := 32
	if addr.Is6() {
		bits = 64
	}
	p, _ := addr.Prefix(bits)
	return p
}

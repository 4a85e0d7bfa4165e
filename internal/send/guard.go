package send

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"code.dny.dev/ssrf"
)

// ErrMetadataAddr refuses a dial to a cloud metadata address. It wraps
// ssrf.ErrProhibitedIP, so callers checking for that see it too.
var ErrMetadataAddr = fmt.Errorf("%w: cloud metadata address", ssrf.ErrProhibitedIP)

// metadataPrefixes are the cloud providers' instance metadata and host
// services. They are refused whatever Config.AllowPrivate says: a
// development setting must never hand out an instance's credentials.
var metadataPrefixes = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),     // link-local: AWS, GCP, Azure, Oracle, DigitalOcean, OpenStack IMDS (169.254.169.254), ECS (169.254.170.2)
	netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud metadata
	netip.MustParsePrefix("168.63.129.16/32"),   // Azure WireServer (a public address)
	netip.MustParsePrefix("192.0.0.192/32"),     // Oracle Cloud (legacy) metadata
	netip.MustParsePrefix("fd00:ec2::/32"),      // AWS Nitro services: IMDS fd00:ec2::254, DNS ::253, NTP ::123
	netip.MustParsePrefix("fd20:ce::254/128"),   // GCP metadata over IPv6
	netip.MustParsePrefix("fe80::/10"),          // IPv6 link-local
}

// nat64 is the well-known NAT64 prefix (RFC 6052), which embeds an IPv4
// address in its last 32 bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// IsMetadataAddr reports whether addr is a cloud metadata (or other
// link-local host service) address, also when written as an IPv4-mapped
// or NAT64 IPv6 address.
func IsMetadataAddr(addr netip.Addr) bool {
	addr = addr.Unmap()
	if addr.Is6() && nat64.Contains(addr) {
		b := addr.As16()
		addr = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	for _, p := range metadataPrefixes {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// CheckAddr is the address policy: it reports why the dialler would refuse
// to connect to addr (nil when it would connect). Endpoint URLs holding an
// IP literal are checked with it when they are saved, so a URL that
// validates can be dialled; names are checked by the dialler once resolved.
// allowPrivate is SLUICE_ALLOW_PRIVATE_TARGETS.
func CheckAddr(addr netip.Addr, allowPrivate bool) error {
	return policy[allowPrivate].check(addr)
}

// policy holds the two guards, built once: private targets refused, and
// allowed.
var policy = map[bool]guard{false: newGuard(false), true: newGuard(true)}

// guard is the dial check: metadata addresses first, always refused, then
// the ssrf guardian (which AllowPrivate configures).
type guard struct {
	ssrf *ssrf.Guardian
}

// newGuard returns the dial check for a Sender.
func newGuard(allowPrivate bool) guard {
	// Receivers often listen on ports other than 80/443; the IP check is the guard.
	opts := []ssrf.Option{ssrf.WithAnyPort()}
	if allowPrivate {
		opts = append(opts, ssrf.WithAllowedV4Prefixes(privateV4...), ssrf.WithAllowedV6Prefixes(privateV6...))
	}
	return guard{ssrf: ssrf.New(opts...)}
}

// check is the decision on one address, whatever the port.
func (g guard) check(addr netip.Addr) error {
	if IsMetadataAddr(addr) {
		return fmt.Errorf("%w: %s", ErrMetadataAddr, addr)
	}
	return g.ssrf.SafeAddr(addr) //nolint:wrapcheck // the ssrf decision is the error: endpointrules.reason reads its text after the ssrf prefix
}

// control decides whether the dialer may connect to address (an IP and
// port: the address actually dialled, after DNS). It is a net.Dialer
// Control function.
func (g guard) control(network, address string, c syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return errors.Join(ssrf.ErrInvalidHostPort, err)
	}
	if err := g.check(ap.Addr()); err != nil {
		return err
	}
	// The network type; the address passes again.
	if err := g.ssrf.Safe(network, address, c); err != nil {
		return fmt.Errorf("check dial target: %w", err)
	}
	return nil
}

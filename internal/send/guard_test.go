package send

import (
	"errors"
	"net/netip"
	"testing"

	"code.dny.dev/ssrf"
	"github.com/stretchr/testify/require"
)

// TestGuardRefusesMetadataEvenWhenPrivateAllowed checks the dial decision
// itself, so no traffic leaves the machine.
func TestGuardRefusesMetadataEvenWhenPrivateAllowed(t *testing.T) {
	t.Parallel()
	metadata := []string{
		"169.254.169.254:80", "169.254.170.2:80", "[fd00:ec2::254]:80", "[fd00:ec2::253]:53",
		"[fd20:ce::254]:80", "100.100.100.200:80", "168.63.129.16:80", "192.0.0.192:80",
		"[::ffff:169.254.169.254]:80", "[64:ff9b::a9fe:a9fe]:80", "[fe80::1]:80",
	}
	for _, allowPrivate := range []bool{false, true} {
		g := newGuard(allowPrivate)
		for _, addr := range metadata {
			err := g.control(network(addr), addr, nil)
			require.ErrorIs(t, err, ErrMetadataAddr, "%s (allowPrivate=%v)", addr, allowPrivate)
			require.ErrorIs(t, err, ssrf.ErrProhibitedIP, "callers checking the ssrf error still see it")
		}
	}

	dev := newGuard(true)
	for _, addr := range []string{"127.0.0.1:8080", "10.0.0.5:443", "192.168.1.2:80", "[::1]:8080", "[fd00::1]:80", "[fd00:ec3::254]:80", "93.184.215.14:443"} {
		require.NoError(t, dev.control(network(addr), addr, nil), addr)
	}
	prod := newGuard(false)
	for _, addr := range []string{"127.0.0.1:8080", "10.0.0.5:443", "[fd00::1]:80", "0.0.0.0:80"} {
		err := prod.control(network(addr), addr, nil)
		require.ErrorIs(t, err, ssrf.ErrProhibitedIP, addr)
		require.False(t, errors.Is(err, ErrMetadataAddr), addr)
	}
	require.NoError(t, prod.control("tcp4", "93.184.215.14:443", nil))
	require.Error(t, prod.control("tcp4", "not-an-address", nil))
}

func TestIsMetadataAddr(t *testing.T) {
	t.Parallel()
	require.True(t, IsMetadataAddr(netip.MustParseAddr("fd00:ec2::254")))
	require.True(t, IsMetadataAddr(netip.MustParseAddr("::ffff:169.254.169.254")))
	require.False(t, IsMetadataAddr(netip.MustParseAddr("fd00::1")))
	require.False(t, IsMetadataAddr(netip.MustParseAddr("8.8.8.8")))
}

func TestReservedHeadersAnyCase(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"keep-alive", "PROXY-CONNECTION", "trailer", "Expect", "te", "webhook-signature", "proxy-authorization", "Host"} {
		require.True(t, IsReservedHeader(h), h)
	}
	for _, h := range []string{"Authorization", "X-Tenant", "Cookie"} {
		require.False(t, IsReservedHeader(h), h)
	}
}

// network is what the dialer passes for addr: tcp4 or tcp6.
func network(addr string) string {
	if netip.MustParseAddrPort(addr).Addr().Unmap().Is4() {
		return "tcp4"
	}
	return "tcp6"
}

// TestCheckAddrIsTheDialDecision: CheckAddr and the dialler's Control agree
// on every address, with private targets allowed and refused.
func TestCheckAddrIsTheDialDecision(t *testing.T) {
	t.Parallel()
	addrs := []string{
		"93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", "127.0.0.1", "10.0.0.5", "172.16.0.1",
		"192.168.1.2", "::1", "fd00::1", "0.0.0.0", "100.64.0.1", "169.254.169.254", "198.18.0.1",
		"240.0.0.1", "255.255.255.255", "224.0.0.1", "192.0.2.1", "2001:db8::1", "2002:7f00:1::",
		"::127.0.0.1", "64:ff9b::7f00:1", "::", "fe80::1", "ff02::1", "fd00:ec2::254",
	}
	for _, allowPrivate := range []bool{false, true} {
		g := newGuard(allowPrivate)
		for _, s := range addrs {
			addr := netip.MustParseAddr(s)
			ap := netip.AddrPortFrom(addr, 443).String()
			dial := g.control(network(ap), ap, nil)
			policy := CheckAddr(addr, allowPrivate)
			require.Equal(t, dial == nil, policy == nil, "%s (allowPrivate=%v): dial %v, policy %v", s, allowPrivate, dial, policy)
		}
	}
	for _, s := range []string{"198.18.0.1", "240.0.0.1", "2001:db8::1", "2002:7f00:1::", "::127.0.0.1", "64:ff9b::7f00:1"} {
		require.ErrorIs(t, CheckAddr(netip.MustParseAddr(s), true), ssrf.ErrProhibitedIP, "%s is refused even with private targets allowed", s)
	}
	require.NoError(t, CheckAddr(netip.MustParseAddr("127.0.0.1"), true))
	require.Error(t, CheckAddr(netip.MustParseAddr("127.0.0.1"), false))
}

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

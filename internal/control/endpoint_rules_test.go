package control

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

func refused(url string, allowPrivate bool) []sluice.FieldError {
	v := &sluice.ValidationError{}
	checkTargetURL(url, allowPrivate, v)
	return v.Fields
}

func TestPrivateTargetsRefusedByDefault(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		"http://example.com/hook", // plain http
		"https://127.0.0.1/hook",
		"https://localhost:8443/hook",
		"https://api.localhost/hook",
		"https://10.1.2.3/hook",
		"https://192.168.0.1/hook",
		"https://[::1]/hook",
		"https://[fd00::1]/hook",
		"https://[::ffff:127.0.0.1]/hook",
		"https://１２７.0.0.1/hook", // full-width digits: dialled as 127.0.0.1
		"https://１０．１．２．３/hook",  // and full-width dots
	} {
		require.NotEmpty(t, refused(url, false), "%s must be refused", url)
		require.Empty(t, refused(url, true), "%s must be allowed with private targets on", url)
	}
	require.Empty(t, refused("https://hooks.example.com/in?x=1", false))
	require.Empty(t, refused("https://93.184.215.14:8443/in", false))
	require.Empty(t, refused("https://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/in", false))
}

// TestUndeliverableTargetsRefused: an IP literal the dialler would never
// connect to, or an impossible port, is refused when the endpoint is saved,
// with private targets allowed or not.
func TestUndeliverableTargetsRefused(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		"https://198.18.0.1/x",         // benchmarking
		"https://240.0.0.1/x",          // reserved
		"https://255.255.255.255/x",    // broadcast
		"https://224.0.0.1/x",          // multicast
		"https://192.0.2.1/x",          // documentation
		"https://0.0.0.0/x",            // "this network"
		"https://100.64.0.1/x",         // carrier-grade NAT
		"https://[2001:db8::1]/x",      // documentation
		"https://[2002:7f00:1::]/x",    // 6to4 of 127.0.0.1
		"https://[::127.0.0.1]/x",      // IPv4-compatible
		"https://[64:ff9b::7f00:1]/x",  // NAT64 of 127.0.0.1
		"https://[::]/x",               // unspecified
		"https://[ff02::1]/x",          // multicast
		"https://[fd00::1%25eth0]/x",   // zone
		"https://169.254.169.254/x",    // metadata
		"https://[fd00:ec2::254]/x",    // metadata
		"https://[::ffff:a9fe:a9fe]/x", // metadata, IPv4-mapped
		"http://127.0.0.1:99999/x",
		"https://example.com:0/x",
		"https://example.com:65536/x",
		"https://169.254.169.２５４/x", // metadata, in full-width digits
		"https://exa\u00ADmple\u200B.com\uFFFF/x",
	} {
		require.NotEmpty(t, refused(url, true), "%s must be refused with private targets allowed", url)
		require.NotEmpty(t, refused(url, false), "%s must be refused", url)
	}
	require.Empty(t, refused("http://127.0.0.1:65535/x", true))
	require.Empty(t, refused("https://example.com:1/x", false))
	require.Empty(t, refused("https://example.com:/x", false), "an empty port is the scheme's")
	require.Contains(t, refused("https://198.18.0.1/x", false)[0].Message, "198.18.0.0/15", "the message names the range")
	require.Contains(t, refused("http://127.0.0.1:99999/x", true)[0].Message, "port")
	require.Empty(t, refused("https://bücher.example/x", false), "an international name")
	require.Empty(t, refused("https://ＥＸＡＭＰＬＥ.com/x", false), "full-width letters map to a name")
}

// TestLegacyIPv4Refused: a host that a resolver may read as an IPv4
// address other than as written (inet_aton's forms) is refused in every
// mode, with the address it would be.
func TestLegacyIPv4Refused(t *testing.T) {
	t.Parallel()
	for url, addr := range map[string]string{
		"https://2130706433:19999/x":    "127.0.0.1",
		"https://0177.0.0.1:19999/":     "127.0.0.1",
		"https://0x7f.1/":               "127.0.0.1",
		"https://0x7F000001/":           "127.0.0.1",
		"https://127.1/":                "127.0.0.1",
		"https://10.0x10203/":           "10.1.2.3",
		"https://127.0.0.1./x":          "127.0.0.1",
		"https://93.184.215.014/x":      "93.184.215.12",
		"https://0251.0376.0251.0376/x": "169.254.169.254",
		"https://２１３０７０６４３３/x":          "127.0.0.1",
		"https://1572395042/x":          "93.184.216.34",
	} {
		for _, private := range []bool{false, true} {
			f := refused(url, private)
			require.Len(t, f, 1, "%s must be refused (private targets %v)", url, private)
			require.Contains(t, f[0].Message, "would be read as "+addr, url)
		}
	}
	for _, url := range []string{"https://1.example/x", "https://0x.example/x", "https://1.2.3.4.5/x", "https://08.1/x", "https://cafe/x"} {
		for _, f := range refused(url, true) {
			require.NotContains(t, f.Message, "would be read as", url)
		}
	}
}

func TestAdaptiveMin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rl sluice.RateLimit
		ok bool
	}{
		{sluice.RateLimit{PerSecond: 10, Adaptive: true}, true},
		{sluice.RateLimit{PerSecond: 10, Adaptive: true, Min: 10}, true},
		{sluice.RateLimit{PerSecond: 10, Adaptive: true, Min: 0.5}, true},
		{sluice.RateLimit{PerMinute: 30, Adaptive: true, Min: 0.5}, true},
		{sluice.RateLimit{PerMinute: 30, Adaptive: true, Min: 1}, false}, // above 0.5 a second
		{sluice.RateLimit{PerSecond: 10, Adaptive: true, Min: 10.5}, false},
		{sluice.RateLimit{PerSecond: 10, Adaptive: true, Min: -1}, false},
		{sluice.RateLimit{PerSecond: 10, Min: 2}, false}, // min without adaptive
	} {
		v := &sluice.ValidationError{}
		checkAdaptive(tc.rl, v)
		if tc.ok {
			require.Empty(t, v.Fields, "%+v", tc.rl)
			continue
		}
		require.Len(t, v.Fields, 1, "%+v", tc.rl)
		require.Equal(t, "rate_limit.min", v.Fields[0].Field)
	}
}

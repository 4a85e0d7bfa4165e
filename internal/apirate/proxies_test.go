package apirate_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apirate"
)

// TestTrustProxies: forwarding headers move the client's address and
// protocol only when the peer is a trusted proxy, and then to the
// right-most address of the chain that is not itself trusted.
func TestTrustProxies(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	type seen struct {
		remote string
		https  bool
	}
	serve := func(trusted []netip.Prefix, remote string, headers ...string) seen {
		t.Helper()
		var got seen
		h := apirate.TrustProxies(trusted, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			got = seen{r.RemoteAddr, apirate.ForwardedHTTPS(r)}
		}))
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		for i := 0; i+1 < len(headers); i += 2 {
			r.Header.Add(headers[i], headers[i+1])
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		require.Equal(t, remote, r.RemoteAddr, "the caller's request is left as it was")
		return got
	}

	for _, tc := range []struct {
		name    string
		remote  string
		headers []string
		want    seen
	}{
		{"untrusted peer: headers ignored", "198.51.100.7:4000",
			[]string{"X-Forwarded-For", "203.0.113.1", "X-Forwarded-Proto", "https", "Forwarded", "for=203.0.113.2;proto=https"},
			seen{"198.51.100.7:4000", false}},
		{"trusted peer without headers", "10.0.0.5:4000", nil, seen{"10.0.0.5:4000", false}},
		{"X-Forwarded-For", "10.0.0.5:4000",
			[]string{"X-Forwarded-For", "203.0.113.1", "X-Forwarded-Proto", "https"},
			seen{"203.0.113.1:0", true}},
		{"X-Forwarded-Proto http", "10.0.0.5:4000",
			[]string{"X-Forwarded-For", "203.0.113.1", "X-Forwarded-Proto", "http"},
			seen{"203.0.113.1:0", false}},
		{"a client's own entries left of the proxy's are not believed", "10.0.0.5:4000",
			[]string{"X-Forwarded-For", "192.0.2.99, 10.9.9.9, 203.0.113.1, 10.0.0.4"},
			seen{"203.0.113.1:0", false}},
		{"every line, in order", "10.0.0.5:4000",
			[]string{"X-Forwarded-For", "192.0.2.99", "X-Forwarded-For", "203.0.113.1,10.0.0.4"},
			seen{"203.0.113.1:0", false}},
		{"a protocol per hop", "10.0.0.5:4000",
			[]string{"X-Forwarded-For", "203.0.113.1, 10.0.0.4", "X-Forwarded-Proto", "https, http"},
			seen{"203.0.113.1:0", true}},
		{"every hop trusted: the left-most", "10.0.0.5:4000",
			[]string{"X-Forwarded-For", "10.0.0.3, 10.0.0.4"},
			seen{"10.0.0.3:0", false}},
		{"unknown: the proxy that could not say", "10.0.0.5:4000",
			[]string{"X-Forwarded-For", "203.0.113.1, unknown, 10.0.0.4"},
			seen{"10.0.0.4:0", false}},
		{"the protocol alone", "10.0.0.5:4000",
			[]string{"X-Forwarded-Proto", "https"},
			seen{"10.0.0.5:4000", true}},
		{"IPv6 and ports", "[fd00::5]:4000",
			[]string{"X-Forwarded-For", "[2001:db8:1:2::1]:5555, ::ffff:10.0.0.4"},
			seen{"[2001:db8:1:2::1]:5555", false}},
		{"Forwarded", "10.0.0.5:4000",
			[]string{"Forwarded", `for=192.0.2.60;proto=http, For="[2001:db8:cafe::17]:4711";Proto=HTTPS;by=10.0.0.5, for=10.0.0.4`},
			seen{"[2001:db8:cafe::17]:4711", true}},
		{"X-Forwarded-For wins over Forwarded", "10.0.0.5:4000",
			[]string{"Forwarded", `for=203.0.113.8;proto=https`, "X-Forwarded-For", "203.0.113.1", "X-Forwarded-Proto", "http"},
			seen{"203.0.113.1:0", false}},
		{"Forwarded with quotes, commas and an obfuscated port", "10.0.0.5:4000",
			[]string{"Forwarded", `for="203.0.113.9:_p1";host="a,b;c"`},
			seen{"203.0.113.9:0", false}},
		{"Forwarded obfuscated node", "10.0.0.5:4000",
			[]string{"Forwarded", `for=_hidden;proto=https`},
			seen{"10.0.0.5:4000", true}},
	} {
		require.Equal(t, tc.want, serve(trusted, tc.remote, tc.headers...), tc.name)
	}

	// Nobody trusted: every header ignored.
	require.Equal(t, seen{"10.0.0.5:4000", false},
		serve(nil, "10.0.0.5:4000", "X-Forwarded-For", "203.0.113.1", "X-Forwarded-Proto", "https"))

	// The address found is what the failures are counted against.
	var prefix netip.Prefix
	h := apirate.TrustProxies(trusted, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		prefix = apirate.ClientPrefix(r)
	}))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.5:4000"
	r.Header.Set("X-Forwarded-For", "2001:db8:1:2::1")
	h.ServeHTTP(httptest.NewRecorder(), r)
	require.Equal(t, "2001:db8:1:2::/64", prefix.String())
}

package app_test

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
)

// proxyBundle is a Sluice that trusts 127.0.0.1 as its proxy, and clients
// that connect from two loopback addresses: the proxy's, and another that
// is no proxy.
type proxyBundle struct {
	*harness
	proxy, stranger *http.Client
}

func setupProxy(t *testing.T) *proxyBundle {
	t.Helper()
	h := startWith(t, map[string]string{"SLUICE_TRUSTED_PROXIES": "127.0.0.1/32"}, app.Roles{API: true, Dashboard: true})
	return &proxyBundle{harness: h, proxy: clientFrom(t, "127.0.0.1"), stranger: clientFrom(t, "127.0.0.2")}
}

// clientFrom is an HTTP client whose connections leave from the loopback
// address ip, and that follows no redirect.
func clientFrom(t *testing.T, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// send sends a request through c, with the harness's API key when key is
// true, with headers as name, value pairs, and returns the answer's status
// and headers.
func (b *proxyBundle) send(c *http.Client, method, path string, body string, key bool, headers ...string) (int, http.Header) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, strings.NewReader(body))
	require.NoError(b.t, err)
	if key {
		req.Header.Set("Authorization", "Bearer "+b.key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	res, err := c.Do(req)
	require.NoError(b.t, err)
	defer res.Body.Close()
	_, err = io.Copy(io.Discard, res.Body)
	require.NoError(b.t, err)
	return res.StatusCode, res.Header
}

// sourceIPs are the audit log's source_ip by object id.
func (b *proxyBundle) sourceIPs() map[string]string {
	b.t.Helper()
	var page struct {
		Data []struct {
			ObjectID string  `json:"object_id"`
			SourceIP *string `json:"source_ip"`
		} `json:"data"`
	}
	b.call(http.MethodGet, "/v1/audit-log?limit=100", nil, http.StatusOK, &page)
	out := map[string]string{}
	for _, e := range page.Data {
		if e.SourceIP != nil {
			out[e.ObjectID] = *e.SourceIP
		}
	}
	return out
}

// TestForwardingHeadersFromAnUntrustedPeerAreIgnored: a client that is no
// trusted proxy cannot choose the address its changes are audited under,
// nor escape the limit on failed authentications by changing
// X-Forwarded-For, nor make the session cookie Secure.
func TestForwardingHeadersFromAnUntrustedPeerAreIgnored(t *testing.T) {
	b := setupProxy(t)
	spoofed := []string{"X-Forwarded-For", "203.0.113.50", "X-Forwarded-Proto", "https", "Forwarded", "for=203.0.113.51;proto=https"}

	// The audit log records the peer.
	status, _ := b.send(b.stranger, http.MethodPut, "/v1/event-types/proxy.spoofed", `{"description":"spoofed"}`, true, spoofed...)
	require.Equal(t, http.StatusCreated, status)
	require.Equal(t, "127.0.0.2", b.sourceIPs()["proxy.spoofed"], "the peer, not a forwarded address")

	// Ten failures a minute per address, whatever the headers say.
	for i := range 10 {
		status, _ := b.send(b.stranger, http.MethodGet, "/v1/endpoints", "", false,
			"X-Forwarded-For", "198.51.100."+strconv.Itoa(i+1), "Forwarded", "for=198.51.100."+strconv.Itoa(i+100))
		require.Equal(t, http.StatusUnauthorized, status, "failure %d", i+1)
	}
	status, hdr := b.send(b.stranger, http.MethodGet, "/v1/endpoints", "", false, "X-Forwarded-For", "198.51.100.200")
	require.Equal(t, http.StatusTooManyRequests, status, "a new X-Forwarded-For does not make a new client")
	require.NotEmpty(t, hdr.Get("Retry-After"))
	status, _ = b.send(b.proxy, http.MethodGet, "/v1/endpoints", "", false)
	require.Equal(t, http.StatusUnauthorized, status, "another peer is not held back")

	// The dashboard's session cookie is not Secure over plain http.
	cookie := b.signIn(b.stranger, spoofed...)
	require.False(t, cookie.Secure, "X-Forwarded-Proto from an untrusted peer")
}

// TestForwardingHeadersFromATrustedProxyAreUsed: behind the trusted proxy,
// the client it names is audited, has failures of its own, and its https
// makes the session cookie Secure.
func TestForwardingHeadersFromATrustedProxyAreUsed(t *testing.T) {
	b := setupProxy(t)

	status, _ := b.send(b.proxy, http.MethodPut, "/v1/event-types/proxy.xff", `{"description":"xff"}`, true,
		"X-Forwarded-For", "192.0.2.1, 203.0.113.60")
	require.Equal(t, http.StatusCreated, status)
	status, _ = b.send(b.proxy, http.MethodPut, "/v1/event-types/proxy.forwarded", `{"description":"forwarded"}`, true,
		"Forwarded", `for="[2001:db8::7]:4711";proto=https`)
	require.Equal(t, http.StatusCreated, status)
	status, _ = b.send(b.proxy, http.MethodPut, "/v1/event-types/proxy.direct", `{"description":"direct"}`, true)
	require.Equal(t, http.StatusCreated, status)
	ips := b.sourceIPs()
	require.Equal(t, "203.0.113.60", ips["proxy.xff"], "the right-most address the proxy vouches for")
	require.Equal(t, "2001:db8::7", ips["proxy.forwarded"])
	require.Equal(t, "127.0.0.1", ips["proxy.direct"], "no forwarding header: the peer")

	// Each client behind the proxy has its own failures.
	for i := range 10 {
		status, _ := b.send(b.proxy, http.MethodGet, "/v1/endpoints", "", false, "X-Forwarded-For", "203.0.113.7")
		require.Equal(t, http.StatusUnauthorized, status, "failure %d", i+1)
	}
	status, _ = b.send(b.proxy, http.MethodGet, "/v1/endpoints", "", false, "X-Forwarded-For", "203.0.113.7")
	require.Equal(t, http.StatusTooManyRequests, status, "the client is over its failures")
	status, _ = b.send(b.proxy, http.MethodGet, "/v1/endpoints", "", false, "X-Forwarded-For", "203.0.113.8")
	require.Equal(t, http.StatusUnauthorized, status, "its neighbour behind the same proxy is not")
	status, _ = b.send(b.proxy, http.MethodGet, "/v1/endpoints", "", false, "X-Forwarded-For", "203.0.113.8, 203.0.113.7")
	require.Equal(t, http.StatusTooManyRequests, status, "the right-most untrusted address is the client")

	// The dashboard: https said by the proxy makes the cookie Secure.
	require.True(t, b.signIn(b.proxy, "X-Forwarded-For", "203.0.113.9", "X-Forwarded-Proto", "https").Secure)
	require.False(t, b.signIn(b.proxy, "X-Forwarded-For", "203.0.113.9", "X-Forwarded-Proto", "http").Secure)
}

// signIn signs in to the dashboard with the harness's key through c and
// returns the session cookie.
func (b *proxyBundle) signIn(c *http.Client, headers ...string) *http.Cookie {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/login", strings.NewReader(url.Values{"api_key": {b.key}}.Encode()))
	require.NoError(b.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	res, err := c.Do(req)
	require.NoError(b.t, err)
	defer res.Body.Close()
	require.Equal(b.t, http.StatusSeeOther, res.StatusCode)
	cookies := res.Cookies()
	require.Len(b.t, cookies, 1)
	return cookies[0]
}

package send_test

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/testkit/egressproxy"
	"github.com/sluice-dev/sluice/internal/testkit/testca"
)

// resolver resolves every name to 127.0.0.1: receivers of any name on
// loopback.
type resolver struct{ asked atomic.Int32 }

func (r *resolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	r.asked.Add(1)
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// hostPort is name with srv's port.
func hostPort(t *testing.T, rawURL, name string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	return name + ":" + u.Port()
}

// Every attempt leaves through the proxy, which is asked for the checked
// IP, never the name: a CONNECT tunnel for https, in which the receiver's
// certificate (for its name alone) still verifies, and the absolute form
// for http, whose Host header keeps the name.
func TestEgressProxySeesEveryAttempt(t *testing.T) {
	t.Parallel()
	proxy := egressproxy.Start(t)
	res := &resolver{}
	s := send.New(send.Config{AllowPrivate: true, Timeout: 5 * time.Second, EgressProxy: proxy.URL(), Resolver: res})

	// https: a receiver whose certificate names receiver.test alone,
	// requiring the endpoint's client certificate.
	serverCA, clientCA := testca.New(t, "receivers"), testca.New(t, "sluice clients")
	seen, from := make(chan string, 10), make(chan string, 10)
	tlsSrv := serverCA.Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		from <- r.RemoteAddr
		subjects(seen)(w, r)
	}), clientCA, "receiver.test")
	var opened atomic.Int32
	secure := msg("https://" + hostPort(t, tlsSrv.URL, "receiver.test") + "/hook")
	secure.TLS = clientTLS(clientCA.Issue(t, testca.Options{CommonName: "endpoint-a", Client: true}), serverCA.PEM, &opened)

	// http: a plain receiver, named plain.test.
	var host atomic.Value
	rec := newRecorder(t, func(_ http.ResponseWriter, r *http.Request) { host.Store(r.Host); from <- r.RemoteAddr })
	plain := msg("http://" + hostPort(t, rec.srv.URL, "plain.test") + "/hook?x=1")

	for range 2 {
		r := s.Send(context.Background(), secure)
		require.True(t, r.Delivered(), r.Err)
		require.Equal(t, "endpoint-a", <-seen)
		r = s.Send(context.Background(), plain)
		require.True(t, r.Delivered(), r.Err)
	}
	for range 4 {
		require.True(t, proxy.Relayed(<-from), "every attempt came through the proxy")
	}
	tlsAddr, plainAddr := hostPort(t, tlsSrv.URL, "127.0.0.1"), hostPort(t, rec.srv.URL, "127.0.0.1")
	asked := proxy.Asked()
	require.Contains(t, asked, "CONNECT "+tlsAddr, "asked for the IP, not the name")
	require.Equal(t, []string{
		"POST http://" + plainAddr + "/hook?x=1 Host=" + hostPort(t, rec.srv.URL, "plain.test"),
		"POST http://" + plainAddr + "/hook?x=1 Host=" + hostPort(t, rec.srv.URL, "plain.test"),
	}, without(asked, "CONNECT "), "each http attempt in absolute form to the checked IP")
	for _, a := range asked {
		require.NotContains(t, strings.Fields(a)[1], ".test", "the proxy is never handed a name")
	}
	require.Equal(t, hostPort(t, rec.srv.URL, "plain.test"), host.Load(), "the receiver sees its name")
	require.EqualValues(t, 2, rec.hits.Load())
}

// without is asked minus the entries starting with prefix.
func without(asked []string, prefix string) []string {
	var out []string
	for _, a := range asked {
		if !strings.HasPrefix(a, prefix) {
			out = append(out, a)
		}
	}
	return out
}

// A name that resolves to an address the guard refuses is refused before
// the proxy is asked: the proxy sees no connection at all.
func TestEgressProxyRefusedBeforeProxy(t *testing.T) {
	t.Parallel()
	proxy := egressproxy.Start(t)
	res := &resolver{}
	s := send.New(send.Config{Timeout: 5 * time.Second, EgressProxy: proxy.URL(), Resolver: res})
	for _, u := range []string{
		"https://receiver.test/hook",
		"http://receiver.test:8080/hook",
		"http://127.0.0.1:8080/hook",
		"https://[::1]/hook",
	} {
		r := s.Send(context.Background(), msg(u))
		require.Zero(t, r.StatusCode, u)
		require.Equal(t, "destination address is not allowed (private/loopback)", r.Err, u)
	}
	r := s.Send(context.Background(), msg("http://169.254.169.254/latest/meta-data"))
	require.Equal(t, "destination address is not allowed (cloud metadata)", r.Err)
	require.EqualValues(t, 2, res.asked.Load(), "the names were resolved by Sluice")
	require.Zero(t, proxy.Accepts(), "the proxy was never dialled")
	require.Empty(t, proxy.Asked())
}

// A proxy that refuses the tunnel fails the attempt with its answer.
func TestEgressProxyRefusal(t *testing.T) {
	t.Parallel()
	proxy := egressproxy.Start(t)
	proxy.Deny()
	s := send.New(send.Config{AllowPrivate: true, Timeout: 5 * time.Second, EgressProxy: proxy.URL(), Resolver: &resolver{}})
	r := s.Send(context.Background(), msg("https://receiver.test:9443/hook"))
	require.Zero(t, r.StatusCode)
	require.Contains(t, r.Err, "egress proxy: CONNECT 127.0.0.1:9443 answered 403 Forbidden")
}

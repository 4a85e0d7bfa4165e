package send_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/testkit/testca"
)

// egressProxy is a loopback HTTP proxy of the test's own: CONNECT
// tunnels, and requests in absolute form forwarded. It records every
// target it was asked for and counts the connections made to it.
type egressProxy struct {
	ln      net.Listener
	accepts atomic.Int32
	deny    bool // answer every CONNECT 403
	mu      sync.Mutex
	asked   []string // "CONNECT <target>", or "<method> <absolute URI> Host=<host>"
	wg      sync.WaitGroup
	// upstream holds the local address of every connection it made to a
	// receiver: where a receiver sees a request come from.
	upstream sync.Map
}

func newEgressProxy(t *testing.T) *egressProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &egressProxy{ln: ln}
	var conns sync.Map
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepts.Add(1)
			conns.Store(c, true)
			p.wg.Go(func() { p.serve(c) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		conns.Range(func(c, _ any) bool { _ = c.(net.Conn).Close(); return true })
		p.wg.Wait()
	})
	return p
}

func (p *egressProxy) url() *url.URL { return &url.URL{Scheme: "http", Host: p.ln.Addr().String()} }

func (p *egressProxy) record(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, s)
}

func (p *egressProxy) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.asked...)
}

// serve answers one client connection: a tunnel, or forwarded requests
// until the client closes it.
func (p *egressProxy) serve(c net.Conn) {
	defer c.Close()
	var raw bytes.Buffer // what the client sent of the request being read
	br := bufio.NewReader(io.TeeReader(c, &raw))
	for {
		raw.Reset()
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if req.Method == http.MethodConnect {
			p.record("CONNECT " + req.RequestURI)
			p.tunnel(c, req.RequestURI)
			return
		}
		// net/http takes the host of an absolute URI for req.Host, as
		// RFC 9112 asks of a proxy; this one keeps the Host header sent.
		head, _, _ := strings.Cut(raw.String(), "\r\n\r\n")
		for _, line := range strings.Split(head, "\r\n")[1:] {
			if name, value, _ := strings.Cut(line, ":"); strings.EqualFold(name, "Host") {
				req.Host = strings.TrimSpace(value)
			}
		}
		p.record(req.Method + " " + req.RequestURI + " Host=" + req.Host)
		if !p.forward(c, req) {
			return
		}
	}
}

func (p *egressProxy) tunnel(c net.Conn, target string) {
	if p.deny {
		_, _ = io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
		return
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer up.Close()
	p.upstream.Store(up.LocalAddr().String(), true)
	_, _ = io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, c)
		_ = up.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	_, _ = io.Copy(c, up)
	_ = c.Close()
	<-done
}

// forward sends req on to the address its absolute URI names, with its
// Host header, and writes the answer back.
func (p *egressProxy) forward(c net.Conn, req *http.Request) bool {
	up, err := net.Dial("tcp", req.URL.Host)
	if err != nil {
		return false
	}
	defer up.Close()
	p.upstream.Store(up.LocalAddr().String(), true)
	req.Header.Del("Proxy-Connection")
	req.Header.Set("Connection", "close")
	if err := req.Write(up); err != nil { // origin form, with Host = req.Host
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(up), req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	resp.Close = false
	return resp.Write(c) == nil
}

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
	proxy := newEgressProxy(t)
	res := &resolver{}
	s := send.New(send.Config{AllowPrivate: true, Timeout: 5 * time.Second, EgressProxy: proxy.url(), Resolver: res})

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
		_, ok := proxy.upstream.Load(<-from)
		require.True(t, ok, "every attempt came from the proxy")
	}
	tlsAddr, plainAddr := hostPort(t, tlsSrv.URL, "127.0.0.1"), hostPort(t, rec.srv.URL, "127.0.0.1")
	asked := proxy.seen()
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
	proxy := newEgressProxy(t)
	res := &resolver{}
	s := send.New(send.Config{Timeout: 5 * time.Second, EgressProxy: proxy.url(), Resolver: res})
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
	require.Zero(t, proxy.accepts.Load(), "the proxy was never dialled")
	require.Empty(t, proxy.seen())
}

// A proxy that refuses the tunnel fails the attempt with its answer.
func TestEgressProxyRefusal(t *testing.T) {
	t.Parallel()
	proxy := newEgressProxy(t)
	proxy.deny = true
	s := send.New(send.Config{AllowPrivate: true, Timeout: 5 * time.Second, EgressProxy: proxy.url(), Resolver: &resolver{}})
	r := s.Send(context.Background(), msg("https://receiver.test:9443/hook"))
	require.Zero(t, r.StatusCode)
	require.Contains(t, r.Err, "egress proxy: CONNECT 127.0.0.1:9443 answered 403 Forbidden")
}

// Package egressproxy is a loopback HTTP proxy of the tests' own, as
// SLUICE_EGRESS_PROXY names one: CONNECT tunnels, and requests in
// absolute form forwarded. It records every target it is asked for, the
// connections made to it, and where its connections to receivers come
// from, so a test can tell that an attempt went through it.
package egressproxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// Proxy is a running proxy; it stops when the test ends.
type Proxy struct {
	ln      net.Listener
	accepts atomic.Int32
	deny    atomic.Bool
	mu      sync.Mutex
	asked   []string
	wg      sync.WaitGroup
	// upstream holds the local address of every connection it made to a
	// receiver: where a receiver sees a request come from.
	upstream sync.Map
}

// Start starts a proxy on a free loopback port.
func Start(t testing.TB) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &Proxy{ln: ln}
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

// URL is the proxy's URL, http://127.0.0.1:port.
func (p *Proxy) URL() *url.URL { return &url.URL{Scheme: "http", Host: p.ln.Addr().String()} }

// Deny makes the proxy answer every CONNECT 403 Forbidden.
func (p *Proxy) Deny() { p.deny.Store(true) }

// Accepts is how many connections were made to the proxy.
func (p *Proxy) Accepts() int { return int(p.accepts.Load()) }

// Asked is what the proxy was asked, in order: "CONNECT <target>", or
// "<method> <absolute URI> Host=<Host header>".
func (p *Proxy) Asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.asked...)
}

// Relayed reports whether a receiver's request from remoteAddr came
// through the proxy.
func (p *Proxy) Relayed(remoteAddr string) bool {
	_, ok := p.upstream.Load(remoteAddr)
	return ok
}

func (p *Proxy) record(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, s)
}

// serve answers one client connection: a tunnel, or forwarded requests
// until the client closes it.
func (p *Proxy) serve(c net.Conn) {
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

func (p *Proxy) tunnel(c net.Conn, target string) {
	if p.deny.Load() {
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
func (p *Proxy) forward(c net.Conn, req *http.Request) bool {
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

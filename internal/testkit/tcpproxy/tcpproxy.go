// Package tcpproxy is a TCP forwarder on loopback that can hold every byte
// passing through it, then let the same connections go on or reset them:
// a database out of reach, for tests and the fault suite (make faults),
// without touching the database itself.
package tcpproxy

import (
	"fmt"
	"net"
	"sync"
)

// Proxy forwards connections made to Addr to its target, one goroutine per
// direction per connection.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	gate  chan struct{} // closed while bytes may pass
	conns map[*pair]struct{}
	held  int // chunks waiting at the gate
	done  chan struct{}
	wg    sync.WaitGroup
}

// pair is one client connection and its connection to the target (nil
// until dialled; both guarded by Proxy.mu once registered).
type pair struct{ client, server net.Conn }

// Start listens on a free loopback port and forwards to target
// ("host:port").
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	open := make(chan struct{})
	close(open)
	p := &Proxy{ln: ln, target: target, gate: open, conns: map[*pair]struct{}{}, done: make(chan struct{})}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is where the proxy listens ("127.0.0.1:port").
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Hold stops every byte, both ways, on every connection, open now or
// opened later (those are accepted, and then held too), until Release or
// Reset. A chunk already read when Hold is called may still pass.
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default: // held already
	}
}

// Release lets the held bytes go on, on the same connections.
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// Reset resets every connection open now, both ways (TCP RST: the peers
// see "connection reset by peer"), then lets bytes pass again for new
// connections.
func (p *Proxy) Reset() {
	for _, c := range p.take() {
		abort(c)
	}
	p.Release()
}

// take unregisters every connection and returns both ends of each.
func (p *Proxy) take() []net.Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []net.Conn
	for c := range p.conns {
		out = append(out, c.client)
		if c.server != nil {
			out = append(out, c.server)
		}
	}
	p.conns = map[*pair]struct{}{}
	return out
}

// Conns is how many connections are open through the proxy.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() {
	select {
	case <-p.done:
		return
	default:
		close(p.done)
	}
	_ = p.ln.Close()
	for _, c := range p.take() {
		_ = c.Close()
	}
	p.Release()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		c := &pair{client: client}
		p.mu.Lock()
		select {
		case <-p.done:
			p.mu.Unlock()
			_ = client.Close()
			return
		default:
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.connect(c) })
	}
}

// connect dials the target for c once bytes may pass (a connection opened
// while they are held reaches nothing, as in a partition) and starts the
// pumps.
func (p *Proxy) connect(c *pair) {
	if !p.wait() {
		_ = c.client.Close()
		return
	}
	server, err := net.Dial("tcp", p.target)
	p.mu.Lock()
	_, live := p.conns[c] // not reset or closed meanwhile
	switch {
	case err != nil || !live:
		delete(p.conns, c)
		p.mu.Unlock()
		abort(c.client)
		if server != nil {
			abort(server)
		}
		return
	}
	c.server = server
	p.mu.Unlock()
	p.wg.Go(func() { p.pump(c, c.client, server) })
	p.wg.Go(func() { p.pump(c, server, c.client) })
}

// pump copies src to dst, each chunk only while the gate is open. When
// either side ends, both are closed (Postgres's protocol has no use for a
// half-closed connection).
func (p *Proxy) pump(c *pair, src, dst net.Conn) {
	defer func() {
		_ = src.Close()
		_ = dst.Close()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// wait blocks while bytes are held; false when the proxy closes.
func (p *Proxy) wait() bool {
	p.mu.Lock()
	gate := p.gate
	p.held++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.held--
		p.mu.Unlock()
	}()
	select {
	case <-gate:
		return true
	case <-p.done:
		return false
	}
}

// Held is how many chunks of bytes (read from one side, not yet written
// to the other) and new connections (not yet dialled through) are held.
func (p *Proxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// abort closes c with a TCP reset rather than an orderly FIN.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

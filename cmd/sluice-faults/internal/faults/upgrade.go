package faults

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// Balancer is the load balancer in front of a scenario's API processes,
// in the suite's own process: each request goes to the next upstream in
// rotation, and an upstream taken out of rotation (as a readiness check
// failing would take it out) gets no new request while its process drains
// and is replaced.
type Balancer struct {
	srv *http.Server
	ln  net.Listener

	mu   sync.Mutex
	ups  []*url.URL
	out  []bool
	next int
}

// StartBalancer listens on a free loopback port and spreads requests over
// bases ("http://host:port").
func StartBalancer(bases []string) (*Balancer, error) {
	b := &Balancer{out: make([]bool, len(bases))}
	for _, s := range bases {
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("balancer upstream %q: %w", s, err)
		}
		b.ups = append(b.ups, u)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("balancer listen: %w", err)
	}
	b.ln = ln
	transport := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	rp := &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(b.pick())
			r.Out.Host = r.In.Host
		},
		// An upstream that does not answer is the balancer's 502: counted
		// as a 5xx, as a client would see it.
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
	}
	b.srv = &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

// URL is where the balancer listens.
func (b *Balancer) URL() string { return "http://" + b.ln.Addr().String() }

// pick is the next upstream in rotation.
func (b *Balancer) pick() *url.URL {
	b.mu.Lock()
	defer b.mu.Unlock()
	for range b.ups {
		i := b.next % len(b.ups)
		b.next++
		if !b.out[i] {
			return b.ups[i]
		}
	}
	return b.ups[0] // none in rotation: never, one at a time is replaced
}

// SetOut takes upstream i out of rotation (out) or puts it back.
func (b *Balancer) SetOut(i int, out bool) {
	b.mu.Lock()
	b.out[i] = out
	b.mu.Unlock()
}

// Close stops the balancer.
func (b *Balancer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = b.srv.Shutdown(ctx)
}

// drainGrace bounds a process's graceful stop (SIGTERM) during an upgrade
// before it is killed.
const drainGrace = 30 * time.Second

// RollingUpgrade upgrades under load what runs the old binary: the new
// binary's migrate first (expand only: the old processes go on), then each
// API process in turn taken out of the balancer's rotation, stopped
// gracefully (SIGTERM), started again on the new binary and put back once
// ready, then each worker stopped gracefully and started on the new
// binary, gap apart.
func (e *Env) RollingUpgrade(ctx context.Context, newBin string, gap time.Duration) error {
	if e.Balancer == nil {
		return errors.New("rolling upgrade: no balancer in front of the API processes")
	}
	at := time.Now()
	if _, err := runOnce(ctx, e.env, newBin, "migrate"); err != nil {
		return fmt.Errorf("rolling upgrade: %w", err)
	}
	e.record(Fault{Kind: "migrate with the new binary", At: at, End: time.Now()})
	for i, p := range e.apis() {
		if err := sleep(ctx, gap); err != nil {
			return err
		}
		at := time.Now()
		e.Balancer.SetOut(i, true)
		p.Stop(drainGrace)
		p.SetBin(newBin)
		if err := p.Start(); err != nil {
			return err
		}
		if err := e.waitReadyAt(ctx, e.apiURLs[i], 30*time.Second); err != nil {
			return err
		}
		e.Balancer.SetOut(i, false)
		e.record(Fault{Kind: fmt.Sprintf("%s out of rotation, SIGTERM, on the new binary, back in rotation", p.Name), At: at, End: time.Now()})
	}
	for _, w := range e.Workers {
		if err := sleep(ctx, gap); err != nil {
			return err
		}
		at := time.Now()
		w.Stop(drainGrace)
		w.SetBin(newBin)
		if err := w.Start(); err != nil {
			return err
		}
		e.record(Fault{Kind: fmt.Sprintf("%s SIGTERM, on the new binary", w.Name), At: at, End: time.Now()})
	}
	return nil
}

// apis is every API process.
func (e *Env) apis() []*Proc { return append([]*Proc{e.API}, e.MoreAPIs...) }

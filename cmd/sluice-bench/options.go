package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"
)

// The options scenario measures what the delivery options cost: one
// endpoint with OAuth2 client credentials, mutual TLS and v1a (Ed25519)
// signatures against a plain one (HMAC, no token, plain HTTP), the same
// load to each in turn, CPU (Sluice and Postgres) per delivery of each.

var optionsScenario = Scenario{
	Name:  "options",
	Title: "Delivery options: auth + tls + v1a vs plain",
	What: "Two loopback receivers, one endpoint each (max_in_flight 100): a plain one (http, v1 signatures) and one " +
		"with every costly delivery option (auth: OAuth2 client credentials from a loopback token endpoint, tokens " +
		"lasting an hour; tls: a client certificate the https receiver requires, its server certificate checked on " +
		"the endpoint's own CA; signature v1a, Ed25519). The same events (batches of 100, 4 clients) go to the plain " +
		"endpoint, then, once Postgres is idle, to the other; CPU per delivery is Sluice's and Postgres's over each " +
		"phase, from the first post to the last delivery received. Target: options ÷ plain ≤ 1.3×.",
	MinTimeout: 4 * time.Minute,
	Run:        optionsRun,
}

func optionsMetrics() []Metric {
	return []Metric{
		{Name: "plain: CPU per delivery", Unit: "ms"},
		{Name: "options: CPU per delivery", Unit: "ms"},
		{Name: "plain: Sluice CPU per delivery", Unit: "ms"},
		{Name: "options: Sluice CPU per delivery", Unit: "ms"},
		{Name: "plain: throughput", Unit: "deliveries/s"},
		{Name: "options: throughput", Unit: "deliveries/s"},
		{Name: "CPU per delivery, options ÷ plain", Unit: "×", Target: 1.3, AtMost: true},
		{Name: "Sluice CPU per delivery, options ÷ plain", Unit: "×"},
		{Name: "token requests", Unit: ""},
	}
}

func optionsRun(ctx context.Context, env *Env) (Table, error) {
	pki, err := newBenchPKI()
	if err != nil {
		return Table{}, err
	}
	plain := newOptionsReceiver(nil)
	defer plain.Close()
	mtls := newOptionsReceiver(pki.server)
	defer mtls.Close()
	var tokenRequests atomic.Int64
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		tokenRequests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token": "bench-token", "token_type": "Bearer", "expires_in": 3600}`))
	}))
	defer tokens.Close()

	const maxInFlight = 100
	optionFields := map[string]any{
		"auth": map[string]string{"type": "oauth2_client_credentials", "token_url": tokens.URL + "/token",
			"client_id": "bench", "client_secret": "bench-secret"},
		"tls":       map[string]string{"client_certificate": pki.clientCert, "client_key": pki.clientKey, "ca_certificates": pki.caPEM},
		"signature": "v1a",
	}
	var subs []string
	defer func() {
		for _, id := range subs {
			_ = env.API.DeleteSubscription(context.WithoutCancel(ctx), id)
		}
	}()
	setup := func(url, typ string, extra map[string]any) error {
		body := map[string]any{"url": url, "max_in_flight": maxInFlight}
		for k, v := range extra {
			body[k] = v
		}
		var ep struct{ ID string }
		if err := env.API.do(ctx, http.MethodPost, "/v1/endpoints", body, http.StatusCreated, &ep); err != nil {
			return fmt.Errorf("create endpoint: %w", err)
		}
		sub, err := env.API.Subscribe(ctx, ep.ID, typ)
		subs = append(subs, sub)
		return err
	}
	if err := setup(plain.URL(), "bench.options.plain", nil); err != nil {
		return Table{}, err
	}
	if err := setup(mtls.URL(), "bench.options.all", optionFields); err != nil {
		return Table{}, err
	}

	events := env.size(10000, 2000)
	phase := func(ctx context.Context, r *optionsReceiver, typ string, s *Sample, name string) error {
		var bodies [][]byte
		for first := 0; first < events; first += 100 {
			evs := make([]EventIn, min(100, events-first))
			for j := range evs {
				evs[j] = EventIn{Type: typ, Payload: payload(0, first+j)}
			}
			bodies = append(bodies, batchBody(evs))
		}
		want := r.Unique() + events
		cpu := env.measureCPU()
		res := postAll(ctx, bodies, 4, env.API.PostBatch)
		if res.failed > 0 {
			return fmt.Errorf("posting events: %s", res.note())
		}
		last, ok := r.Await(ctx, want)
		use := cpu()
		if !ok {
			return fmt.Errorf("%s: %d of %d deliveries received", name, r.Unique()-(want-events), events)
		}
		s.Values[name+": CPU per delivery"] = perEvent(use.sluice+use.postgres, events)
		s.Values[name+": Sluice CPU per delivery"] = perEvent(use.sluice, events)
		s.Values[name+": throughput"] = float64(events) / last.Sub(res.start).Seconds()
		return nil
	}
	t, err := env.Repeat(ctx, optionsMetrics(), func(ctx context.Context, _ int) (Sample, error) {
		s := Sample{Values: map[string]float64{}}
		before := tokenRequests.Load()
		if err := phase(ctx, plain, "bench.options.plain", &s, "plain"); err != nil {
			return s, err
		}
		if note := env.waitIdle(ctx, 30*time.Second); note != "" {
			s.Note = joinNotes(s.Note, "between the phases: "+note)
		}
		if err := phase(ctx, mtls, "bench.options.all", &s, "options"); err != nil {
			return s, err
		}
		s.Values["CPU per delivery, options ÷ plain"] = s.Values["options: CPU per delivery"] / s.Values["plain: CPU per delivery"]
		s.Values["Sluice CPU per delivery, options ÷ plain"] = s.Values["options: Sluice CPU per delivery"] / s.Values["plain: Sluice CPU per delivery"]
		s.Values["token requests"] = float64(tokenRequests.Load() - before)
		return s, nil
	})
	t.Notes = append(t.Notes, fmt.Sprintf("%d events per phase, batches of 100 from 4 clients; the options receiver "+
		"requires a client certificate and a bearer token (it refuses without them)", events))
	return t, err
}

// optionsReceiver answers 200 to each delivery and counts the distinct
// webhook-ids; over TLS (requiring a client certificate) when given a
// configuration, and then it refuses a request without a bearer token.
type optionsReceiver struct {
	srv     *httptest.Server
	bearer  bool
	mu      sync.Mutex
	seen    map[string]bool
	last    time.Time
	changed chan struct{}
}

func newOptionsReceiver(cfg *tls.Config) *optionsReceiver {
	r := &optionsReceiver{seen: map[string]bool{}, changed: make(chan struct{}, 1), bearer: cfg != nil}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	if cfg == nil {
		r.srv.Start()
		return r
	}
	r.srv.TLS = cfg
	r.srv.StartTLS()
	return r
}

func (r *optionsReceiver) URL() string { return r.srv.URL + "/hook" }
func (r *optionsReceiver) Close()      { r.srv.Close() }

func (r *optionsReceiver) serve(w http.ResponseWriter, req *http.Request) {
	if r.bearer && req.Header.Get("Authorization") != "Bearer bench-token" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	r.mu.Lock()
	if id := req.Header.Get("Webhook-Id"); !r.seen[id] {
		r.seen[id], r.last = true, time.Now()
	}
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// Unique is the number of distinct deliveries received.
func (r *optionsReceiver) Unique() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// Await waits until want distinct deliveries have arrived (true, with
// when the last did) or ctx ends.
func (r *optionsReceiver) Await(ctx context.Context, want int) (time.Time, bool) {
	for {
		r.mu.Lock()
		n, last := len(r.seen), r.last
		r.mu.Unlock()
		if n >= want {
			return last, true
		}
		select {
		case <-ctx.Done():
			return time.Time{}, false
		case <-r.changed:
		}
	}
}

// benchPKI is a CA, a server certificate for 127.0.0.1 that requires
// client certificates from the same CA, and a client certificate.
type benchPKI struct {
	server                       *tls.Config
	caPEM, clientCert, clientKey string
}

func newBenchPKI() (benchPKI, error) {
	var p benchPKI
	key := func() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }
	caKey, err := key()
	if err != nil {
		return p, fmt.Errorf("ca key: %w", err)
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice-bench CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(90 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return p, fmt.Errorf("ca: %w", err)
	}
	ca, _ = x509.ParseCertificate(caDER)
	issue := func(n int64, cn string, usage x509.ExtKeyUsage, ips []net.IP) (certPEM, keyPEM []byte, err error) {
		k, err := key()
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(n), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(90 * 24 * time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage},
			KeyUsage: x509.KeyUsageDigitalSignature, IPAddresses: ips}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			return nil, nil, fmt.Errorf("make a certificate: %w", err)
		}
		kDER, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return nil, nil, fmt.Errorf("encode a key: %w", err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kDER}), nil
	}
	srvCert, srvKey, err := issue(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return p, fmt.Errorf("server certificate: %w", err)
	}
	cliCert, cliKey, err := issue(3, "sluice-bench client", x509.ExtKeyUsageClientAuth, nil)
	if err != nil {
		return p, fmt.Errorf("client certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		return p, fmt.Errorf("server key pair: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	p.server = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	p.caPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	p.clientCert, p.clientKey = string(cliCert), string(cliKey)
	return p, nil
}

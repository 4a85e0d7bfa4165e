package send

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
)

// ClientTLS is an endpoint's mutual TLS as an attempt asks for it: the
// certificate it presents and the CAs it trusts the receiver's on. The
// client it makes is built once per endpoint version and reused by every
// attempt of that version.
type ClientTLS struct {
	Endpoint uuid.UUID
	// Version tells one state of the endpoint from the next (its
	// updated_at): a new version builds a new client.
	Version time.Time
	// Certificate is the PEM client certificate, then its chain.
	Certificate string
	// CACertificates are the PEM CAs the receiver's certificate is checked
	// against; "" for the system roots.
	CACertificates string
	// Key returns the PEM private key of Certificate. It is called only
	// when a version's client is built, so the sealed key is opened once.
	Key func() ([]byte, error)
}

// maxTLSClients bounds the endpoints' clients a Sender keeps: past it, one
// is dropped for each new one (an endpoint deleted or no longer using TLS
// leaves its client behind).
const maxTLSClients = 4096

// tlsClients are the endpoints' own clients, by endpoint, each of the
// newest version an attempt asked for.
type tlsClients struct {
	mu sync.Mutex
	m  map[uuid.UUID]*tlsClient
}

// tlsClient is one endpoint version's client, built once (build).
type tlsClient struct {
	version time.Time
	mu      sync.Mutex
	built   bool
	client  *http.Client
	err     error
}

// client is the client of c's endpoint version, built on a clone of base
// the first time it is asked for. An attempt of an older version than the
// one kept uses the newer client: the endpoint's settings now.
func (cs *tlsClients) client(base *http.Transport, c *ClientTLS) (*http.Client, error) {
	cs.mu.Lock()
	e := cs.m[c.Endpoint]
	var old *tlsClient
	if e == nil || e.version.Before(c.Version) {
		old, e = e, &tlsClient{version: c.Version}
		if old == nil && len(cs.m) >= maxTLSClients {
			for id, drop := range cs.m {
				old = drop
				delete(cs.m, id)
				break
			}
		}
		cs.m[c.Endpoint] = e
	}
	cs.mu.Unlock()
	if old != nil {
		old.closeIdle()
	}
	return e.get(base, c)
}

// get builds the client the first time it is asked for.
func (e *tlsClient) get(base *http.Transport, c *ClientTLS) (*http.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.built {
		e.client, e.err = build(base, c)
		e.built = true
	}
	return e.client, e.err
}

// closeIdle closes the idle connections of a client no longer kept; those
// in use close when their attempt ends.
func (e *tlsClient) closeIdle() {
	e.mu.Lock()
	client := e.client
	e.mu.Unlock()
	if client != nil {
		client.CloseIdleConnections()
	}
}

// build makes c's client on a clone of base: the same dialler (the
// address guard, the egress proxy) with c's certificate and CAs.
func build(base *http.Transport, c *ClientTLS) (*http.Client, error) {
	cfg, err := c.config()
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	t := base.Clone()
	t.TLSClientConfig = cfg
	return newClient(t), nil
}

// config is c's TLS configuration.
func (c *ClientTLS) config() (*tls.Config, error) {
	key, err := c.Key()
	if err != nil {
		return nil, fmt.Errorf("client key: %w", err)
	}
	cert, err := tls.X509KeyPair([]byte(c.Certificate), key)
	if err != nil {
		return nil, fmt.Errorf("client certificate: %w", err)
	}
	cfg := &tls.Config{
		// Always the endpoint's certificate, as curl presents its --cert:
		// crypto/tls would send none when the CAs a receiver lists do not
		// name its issuer, and the receiver's refusal says more than that.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil },
		MinVersion:           tls.VersionTLS12,
	}
	if c.CACertificates != "" {
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM([]byte(c.CACertificates)) {
			return nil, errors.New("ca_certificates hold no PEM certificate")
		}
	}
	return cfg, nil
}

// Package testca is a certificate authority made in a test: it issues
// client and server certificates (ECDSA P-256) as PEM, for the tests of
// mutual TLS (an endpoint's tls option) and of receivers whose
// certificate only their own CA vouches for.
package testca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// CA is a test's certificate authority.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA's own certificate.
	PEM string
}

// New makes a CA named name.
func New(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &CA{cert: cert, key: key, PEM: encode("CERTIFICATE", der)}
}

// Pool is a pool holding the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return pool
}

// Cert is an issued certificate and its key, as PEM.
type Cert struct {
	PEM, KeyPEM string
	NotAfter    time.Time
}

// TLS is the certificate as crypto/tls uses it.
func (c Cert) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair([]byte(c.PEM), []byte(c.KeyPEM))
	require.NoError(t, err)
	return pair
}

// Options shape an issued certificate: a server's names (a name that
// parses as an IP is an IP address), or a client's; valid until NotAfter
// (default a day from now); on the key of KeyOf (a renewal) or a new one.
type Options struct {
	CommonName string
	Names      []string
	Client     bool
	NotAfter   time.Time
	KeyOf      *Cert
}

// Issue issues a certificate as o says.
func (ca *CA) Issue(t testing.TB, o Options) Cert {
	t.Helper()
	key := newKey(t)
	if o.KeyOf != nil {
		block, _ := pem.Decode([]byte(o.KeyOf.KeyPEM))
		parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		require.NoError(t, err)
		key = parsed.(*ecdsa.PrivateKey)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: o.CommonName, Organization: []string{"Sluice tests"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	}
	if o.Client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	for _, n := range o.Names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return Cert{PEM: encode("CERTIFICATE", der), KeyPEM: encode("PRIVATE KEY", keyDER), NotAfter: tmpl.NotAfter.UTC().Truncate(time.Second)}
}

// Server starts an https receiver on loopback answering with h, its
// certificate issued by ca for names (127.0.0.1 when none); with
// clients, it requires a client certificate that clients issued. It is
// closed when the test ends.
func (ca *CA) Server(t testing.TB, h http.Handler, clients *CA, names ...string) *httptest.Server {
	t.Helper()
	if len(names) == 0 {
		names = []string{"127.0.0.1"}
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are what the tests want
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, Options{CommonName: names[0], Names: names}).TLS(t)}, MinVersion: tls.VersionTLS12}
	if clients != nil {
		srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
		srv.TLS.ClientCAs = clients.Pool()
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	require.NoError(t, err)
	return n
}

func encode(typ string, der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
}

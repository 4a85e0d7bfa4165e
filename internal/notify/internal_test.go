package notify

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/smtpsink"
)

func TestParseURLDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url, addr      string
		implicit, auth bool
		user, pass     string
	}{
		{"smtp://mail.example.com", "mail.example.com:25", false, false, "", ""},
		{"smtps://mail.example.com", "mail.example.com:465", true, false, "", ""},
		{"smtp://u:p@mail.example.com:587/", "mail.example.com:587", false, true, "u", "p"},
		{"smtps://u@[::1]:2465", "[::1]:2465", true, true, "u", ""},
	} {
		m, err := NewMailer(MailConfig{URL: tc.url, From: "a@b.c"})
		require.NoError(t, err, tc.url)
		require.Equal(t, tc.addr, m.Addr(), tc.url)
		require.Equal(t, tc.implicit, m.implicit, tc.url)
		require.Equal(t, tc.auth, m.auth, tc.url)
		require.Equal(t, tc.user, m.user, tc.url)
		require.Equal(t, tc.pass, m.pass, tc.url)
		require.Equal(t, DefaultTimeout, m.timeout)
	}
}

// selfSigned returns a server certificate for 127.0.0.1 and a pool trusting it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "smtpsink"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

func TestSendImplicitTLS(t *testing.T) {
	t.Parallel()
	cert, pool := selfSigned(t)
	sink := smtpsink.StartTLS(t, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	require.Regexp(t, `^smtps://`, sink.URL())

	untrusted, err := NewMailer(MailConfig{URL: sink.URL(), From: "a@b.c", Timeout: 5 * time.Second})
	require.NoError(t, err)
	require.ErrorContains(t, untrusted.Send(t.Context(), Message{To: "ops@acme.test", Subject: "s", Text: "t"}), "certificate")

	m, err := NewMailer(MailConfig{URL: sink.URL(), From: "a@b.c", Timeout: 5 * time.Second})
	require.NoError(t, err)
	m.tlsConfig.RootCAs = pool
	require.NoError(t, m.Send(t.Context(), Message{To: "ops@acme.test", Subject: "over tls", Text: "t"}))
	got := sink.Wait(t, 1, 5*time.Second)
	require.Len(t, got, 1)
	require.Equal(t, "over tls", got[0].Subject)
	require.Equal(t, "user", got[0].AuthUser)
}

package send_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/testkit/testca"
)

// clientTLS is c as an endpoint's tls option, with a key that counts how
// often it is opened.
func clientTLS(c testca.Cert, ca string, opened *atomic.Int32) *send.ClientTLS {
	return &send.ClientTLS{
		Endpoint: uuid.New(), Version: time.Now(), Certificate: c.PEM, CACertificates: ca,
		Key: func() ([]byte, error) { opened.Add(1); return []byte(c.KeyPEM), nil },
	}
}

// subjects answers 200 and keeps the subject of each client certificate
// it verified.
func subjects(seen chan<- string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			seen <- r.TLS.VerifiedChains[0][0].Subject.CommonName
		}
		w.WriteHeader(http.StatusOK)
	}
}

func TestClientCertificate(t *testing.T) {
	t.Parallel()
	serverCA, clientCA, otherCA := testca.New(t, "receivers"), testca.New(t, "sluice clients"), testca.New(t, "strangers")
	seen := make(chan string, 10)
	srv := serverCA.Server(t, subjects(seen), clientCA)
	s := devSender(5 * time.Second)
	var opened atomic.Int32

	// The right certificate, and the receiver checked against the
	// endpoint's CA: delivered, the receiver saw who presented it.
	m := msg(srv.URL + "/hook")
	m.TLS = clientTLS(clientCA.Issue(t, testca.Options{CommonName: "endpoint-a", Client: true}), serverCA.PEM, &opened)
	res := s.Send(context.Background(), m)
	require.True(t, res.Delivered(), res.Err)
	require.Equal(t, "endpoint-a", <-seen)

	// A certificate the receiver's CA did not issue: the handshake fails.
	m.TLS = clientTLS(otherCA.Issue(t, testca.Options{CommonName: "stranger", Client: true}), serverCA.PEM, &opened)
	res = s.Send(context.Background(), m)
	require.Zero(t, res.StatusCode)
	require.Contains(t, res.Err, "unknown certificate authority")

	// No certificate at all: the shared client, which knows neither the
	// receiver's CA nor a certificate to present.
	m.TLS = nil
	res = s.Send(context.Background(), m)
	require.Zero(t, res.StatusCode)
	require.Contains(t, res.Err, "certificate")
	require.Empty(t, seen)
}

func TestReceiverCheckedAgainstItsCA(t *testing.T) {
	t.Parallel()
	serverCA, clientCA, otherCA := testca.New(t, "receivers"), testca.New(t, "sluice clients"), testca.New(t, "strangers")
	srv := serverCA.Server(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}), nil)
	cert := clientCA.Issue(t, testca.Options{CommonName: "endpoint-a", Client: true})
	s := devSender(5 * time.Second)
	var opened atomic.Int32

	m := msg(srv.URL)
	m.TLS = clientTLS(cert, serverCA.PEM, &opened)
	res := s.Send(context.Background(), m)
	require.True(t, res.Delivered(), "its certificate is signed by ca_certificates: %s", res.Err)

	m.TLS = clientTLS(cert, otherCA.PEM, &opened)
	res = s.Send(context.Background(), m)
	require.Zero(t, res.StatusCode)
	require.Contains(t, res.Err, "certificate verification failed", "ca_certificates replace the system roots")
}

// An endpoint's client is built once per version: its key is opened for
// the first attempt of a version alone, and an attempt of an older version
// uses the newer one.
func TestClientTLSBuiltOncePerVersion(t *testing.T) {
	t.Parallel()
	serverCA, clientCA := testca.New(t, "receivers"), testca.New(t, "sluice clients")
	seen := make(chan string, 10)
	srv := serverCA.Server(t, subjects(seen), clientCA)
	s := devSender(5 * time.Second)
	var opened atomic.Int32

	v1 := clientTLS(clientCA.Issue(t, testca.Options{CommonName: "v1", Client: true}), serverCA.PEM, &opened)
	m := msg(srv.URL)
	m.TLS = v1
	for range 3 {
		require.True(t, s.Send(context.Background(), m).Delivered())
		require.Equal(t, "v1", <-seen)
	}
	require.EqualValues(t, 1, opened.Load(), "one build for three attempts")

	v2 := clientTLS(clientCA.Issue(t, testca.Options{CommonName: "v2", Client: true}), serverCA.PEM, &opened)
	v2.Endpoint, v2.Version = v1.Endpoint, v1.Version.Add(time.Millisecond)
	m.TLS = v2
	require.True(t, s.Send(context.Background(), m).Delivered())
	require.Equal(t, "v2", <-seen, "a new version presents its own certificate")
	m.TLS = v1
	require.True(t, s.Send(context.Background(), m).Delivered())
	require.Equal(t, "v2", <-seen, "an older version uses the endpoint's newest client")
	require.EqualValues(t, 2, opened.Load())

	// A client that cannot be built fails every attempt of its version,
	// built (and failing) once.
	var badOpened atomic.Int32
	bad := clientTLS(clientCA.Issue(t, testca.Options{CommonName: "bad", Client: true}), serverCA.PEM, &badOpened)
	bad.Key = func() ([]byte, error) { badOpened.Add(1); return []byte("not a key"), nil }
	m.TLS = bad
	for range 2 {
		res := s.Send(context.Background(), m)
		require.Zero(t, res.StatusCode)
		require.Contains(t, res.Err, "tls: client certificate")
	}
	require.EqualValues(t, 1, badOpened.Load())
}

// An endpoint's client certificate goes only to https receivers: an http
// URL is sent with the shared client, as before.
func TestClientTLSOnlyForHTTPS(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, nil)
	clientCA := testca.New(t, "sluice clients")
	var opened atomic.Int32
	m := msg(rec.srv.URL)
	m.TLS = clientTLS(clientCA.Issue(t, testca.Options{CommonName: "a", Client: true}), "", &opened)
	require.True(t, devSender(5*time.Second).Send(context.Background(), m).Delivered())
	require.Zero(t, opened.Load())
}

// An endpoint's own client dials through the same address guard: a
// loopback receiver is refused unless private targets are allowed.
func TestClientTLSKeepsTheGuard(t *testing.T) {
	t.Parallel()
	serverCA, clientCA := testca.New(t, "receivers"), testca.New(t, "sluice clients")
	srv := serverCA.Server(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), clientCA)
	var opened atomic.Int32
	m := msg(srv.URL)
	m.TLS = clientTLS(clientCA.Issue(t, testca.Options{CommonName: "a", Client: true}), serverCA.PEM, &opened)
	res := send.New(send.Config{Timeout: 5 * time.Second}).Send(context.Background(), m)
	require.Zero(t, res.StatusCode)
	require.Equal(t, "destination address is not allowed (private/loopback)", res.Err)
	require.EqualValues(t, 1, opened.Load(), "its own client, refused by the guard")
}

package control_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/testca"
)

// tlsJSON is a tls option as JSON, of the non-empty fields given
// (client_certificate, client_key, ca_certificates).
func tlsJSON(t *testing.T, cert, key, ca string) string {
	t.Helper()
	obj := map[string]string{}
	for name, v := range map[string]string{"client_certificate": cert, "client_key": key, "ca_certificates": ca} {
		if v != "" {
			obj[name] = v
		}
	}
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	return string(b)
}

func TestTLSOption(t *testing.T) {
	t.Parallel()
	b := setupEndpoints(t)
	ctx := context.Background()
	ca := testca.New(t, "clients")
	cert := ca.Issue(t, testca.Options{CommonName: "endpoint-a", Client: true})
	storedKey := func(id sluice.Endpoint) []byte {
		key, err := b.f.Store.EndpointTLSKey(ctx, b.owner.Tenant, id.ID)
		require.NoError(t, err)
		return key
	}

	ep := b.create(t, b.owner, control.EndpointInput{Options: options("tls", tlsJSON(t, cert.PEM, cert.KeyPEM, ca.PEM))}).Endpoint
	require.NotNil(t, ep.TLS)
	require.Equal(t, "CN=endpoint-a,O=Sluice tests", ep.TLS.Subject)
	require.True(t, cert.NotAfter.Equal(ep.TLS.NotAfter))
	require.Equal(t, ca.PEM[:len(ca.PEM)-1], ep.TLS.CACertificates)
	require.Nil(t, ep.TLS.ClientKey, "the key is write-only")
	require.Equal(t, cert.KeyPEM[:len(cert.KeyPEM)-1], string(storedKey(ep)), "sealed in its column")
	read, err := json.Marshal(ep)
	require.NoError(t, err)
	require.NotContains(t, string(read), "PRIVATE KEY")
	require.Contains(t, string(read), `"client_certificate_subject":"CN=endpoint-a,O=Sluice tests"`)

	// A PATCH that does not name tls keeps it, and one that sends the
	// certificate back without the key keeps the stored key: no change.
	got, err := b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("timeout_seconds", "5")})
	require.NoError(t, err)
	require.Equal(t, ep.TLS, got.TLS)
	got, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("tls", tlsJSON(t, cert.PEM, "", ca.PEM))})
	require.NoError(t, err)
	require.Equal(t, ep.TLS, got.TLS)
	require.Empty(t, b.auditLog(t, b.owner)[0].Changed, "the same certificate sent back changes nothing")
	// A read sent back whole is taken too.
	back, err := json.Marshal(got.TLS)
	require.NoError(t, err)
	_, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("tls", string(back))})
	require.NoError(t, err)

	// A certificate renewed on the same key may be sent alone.
	sameKey := ca.Issue(t, testca.Options{CommonName: "endpoint-a", Client: true, KeyOf: &cert, NotAfter: cert.NotAfter.Add(time.Hour)})
	got, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("tls", tlsJSON(t, sameKey.PEM, "", ca.PEM))})
	require.NoError(t, err)
	require.True(t, sameKey.NotAfter.Equal(got.TLS.NotAfter))
	require.Equal(t, cert.KeyPEM[:len(cert.KeyPEM)-1], string(storedKey(got)), "the stored key kept")

	// A new certificate needs its own key: the stored one is not its.
	renewed := ca.Issue(t, testca.Options{CommonName: "endpoint-a-2", Client: true})
	_, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("tls", tlsJSON(t, renewed.PEM, "", ""))})
	require.Equal(t, []string{"tls.client_key"}, fields(t, err))
	require.Contains(t, err.Error(), "the stored key does not match")
	got, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("tls", tlsJSON(t, renewed.PEM, renewed.KeyPEM, ""))})
	require.NoError(t, err)
	require.Equal(t, "CN=endpoint-a-2,O=Sluice tests", got.TLS.Subject)
	require.Empty(t, got.TLS.CACertificates, "the option is replaced whole: no CA, the system roots")
	require.Equal(t, renewed.KeyPEM[:len(renewed.KeyPEM)-1], string(storedKey(got)))
	require.Equal(t, []string{"tls"}, b.auditLog(t, b.owner)[0].Changed)

	// null removes the option and its key.
	got, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("tls", "null")})
	require.NoError(t, err)
	require.Nil(t, got.TLS)
	require.Nil(t, storedKey(got))
}

func TestTLSOptionRefused(t *testing.T) {
	t.Parallel()
	b := setupEndpoints(t)
	ctx := context.Background()
	ca := testca.New(t, "clients")
	cert := ca.Issue(t, testca.Options{CommonName: "endpoint-a", Client: true})
	other := ca.Issue(t, testca.Options{CommonName: "endpoint-b", Client: true})
	expired := ca.Issue(t, testca.Options{CommonName: "old", Client: true, NotAfter: time.Now().Add(-time.Minute)})
	junkCert := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")}))
	encrypted := string(pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte("sealed")}))
	ep := b.create(t, b.owner, control.EndpointInput{Options: options("tls", tlsJSON(t, cert.PEM, cert.KeyPEM, ""))}).Endpoint

	for name, tc := range map[string]struct{ value, field, says string }{
		"not an object":       {`"on"`, "tls", "must be null or an object"},
		"a field it has not":  {`{"client_certificate": "x", "cert": "x"}`, "tls", "unknown field"},
		"no certificate":      {tlsJSON(t, "", cert.KeyPEM, ""), "tls.client_certificate", "is required"},
		"certificate text":    {tlsJSON(t, "hello", cert.KeyPEM, ""), "tls.client_certificate", "is not PEM"},
		"certificate a key":   {tlsJSON(t, cert.KeyPEM, cert.KeyPEM, ""), "tls.client_certificate", "holds a PRIVATE KEY block"},
		"certificate junk":    {tlsJSON(t, junkCert, cert.KeyPEM, ""), "tls.client_certificate", "is not a certificate"},
		"certificate huge":    {tlsJSON(t, cert.PEM+string(make([]byte, sluice.MaxPEMBytes)), cert.KeyPEM, ""), "tls.client_certificate", "at most"},
		"certificate expired": {tlsJSON(t, expired.PEM, expired.KeyPEM, ""), "tls.client_certificate", "expired at"},
		"key text":            {tlsJSON(t, cert.PEM, "secret", ""), "tls.client_key", "is not PEM"},
		"key a certificate":   {tlsJSON(t, cert.PEM, cert.PEM, ""), "tls.client_key", "holds a CERTIFICATE block"},
		"key encrypted":       {tlsJSON(t, cert.PEM, encrypted, ""), "tls.client_key", "is encrypted"},
		"key of another":      {tlsJSON(t, cert.PEM, other.KeyPEM, ""), "tls.client_key", "does not match client_certificate"},
		"key new, absent":     {tlsJSON(t, other.PEM, "", ""), "tls.client_key", "is required"},
		"CA text":             {tlsJSON(t, cert.PEM, cert.KeyPEM, "my CA"), "tls.ca_certificates", "is not PEM"},
		"CA a key":            {tlsJSON(t, cert.PEM, cert.KeyPEM, cert.KeyPEM), "tls.ca_certificates", "holds a PRIVATE KEY block"},
	} {
		in := control.EndpointInput{Options: options("tls", tc.value)}
		_, err := b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, in)
		require.Equal(t, []string{tc.field}, fields(t, err), name)
		require.Contains(t, err.Error(), tc.says, name)
		in.URL = new("https://127.0.0.1:9/x")
		_, err = b.ctl.CreateEndpoint(ctx, b.owner, in)
		require.Equal(t, []string{tc.field}, fields(t, err), name)
	}
	_, err := b.ctl.CreateEndpoint(ctx, b.owner, control.EndpointInput{URL: new("https://127.0.0.1:9/x"),
		Options: options("tls", tlsJSON(t, cert.PEM, "", ""))})
	require.Equal(t, []string{"tls.client_key"}, fields(t, err), "a new endpoint has no key to keep")

	got, err := b.ctl.Endpoint(ctx, b.owner, ep.ID)
	require.NoError(t, err)
	require.Equal(t, ep.TLS, got.TLS, "a refused update changes nothing")
	key, err := b.f.Store.EndpointTLSKey(ctx, b.owner.Tenant, ep.ID)
	require.NoError(t, err)
	require.Equal(t, cert.KeyPEM[:len(cert.KeyPEM)-1], string(key))
}

// The form's three tls fields: all empty is no option, an empty key
// keeps the stored one.
func TestFormTLS(t *testing.T) {
	t.Parallel()
	require.JSONEq(t, `null`, string(control.FormOptions(map[string]string{})["tls"]))
	require.JSONEq(t, `{"client_certificate": "C", "ca_certificates": "A"}`,
		string(control.FormOptions(map[string]string{"tls.client_certificate": " C ", "tls.client_key": " ", "tls.ca_certificates": "A"})["tls"]))
}

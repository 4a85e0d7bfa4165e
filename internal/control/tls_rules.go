package control

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"strings"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// The rules of the tls delivery option: {"client_certificate": PEM,
// "client_key": PEM, "ca_certificates": PEM?}. The option is replaced as
// a whole; only the key may be left out, to keep the stored one, when it
// matches the certificate sent. A read shows client_certificate_subject
// and not_after beside the certificates: a request may send them back,
// and they are read from the certificate again.

// tlsInput is the tls option as a request writes it.
type tlsInput struct {
	ClientCertificate *string `json:"client_certificate"`
	ClientKey         *string `json:"client_key"`
	CACertificates    *string `json:"ca_certificates"`
	// What a read shows beside them, taken back and ignored.
	Subject  json.RawMessage `json:"client_certificate_subject"`
	NotAfter json.RawMessage `json:"not_after"`
}

// tlsOption reads a tls option that is not null: its certificate, key
// and CAs checked as PEM of what they must be, and the key against the
// certificate. Whether the certificate has expired, and the stored key
// when the request sends none, are checked when it is saved (saveTLS).
func tlsOption(raw json.RawMessage, v *sluice.ValidationError) *sluice.TLSOption {
	var in tlsInput
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		v.Add("tls", "must be null or an object with client_certificate, client_key and ca_certificates, each a PEM text (%s)", jsonReason(err))
		return nil
	}
	if in.ClientCertificate == nil || strings.TrimSpace(*in.ClientCertificate) == "" {
		v.Add("tls.client_certificate", "is required: the PEM certificate the attempts present")
		return nil
	}
	before := len(v.Fields)
	certs := pemCertificates("tls.client_certificate", *in.ClientCertificate, v)
	opt := &sluice.TLSOption{ClientCertificate: strings.TrimSpace(*in.ClientCertificate)}
	if len(certs) > 0 {
		opt.Subject, opt.NotAfter = certs[0].Subject.String(), certs[0].NotAfter.UTC()
	}
	if in.CACertificates != nil && strings.TrimSpace(*in.CACertificates) != "" {
		pemCertificates("tls.ca_certificates", *in.CACertificates, v)
		opt.CACertificates = strings.TrimSpace(*in.CACertificates)
	}
	if in.ClientKey != nil {
		opt.ClientKey = pemKey(*in.ClientKey, v)
		if opt.ClientKey != nil && len(certs) > 0 {
			if _, err := tls.X509KeyPair([]byte(opt.ClientCertificate), opt.ClientKey); err != nil {
				v.Add("tls.client_key", "does not match client_certificate: it is not the private key of its public key")
			}
		}
	}
	if len(v.Fields) > before {
		return nil
	}
	return opt
}

// pemCertificates reads field, PEM certificates, adding to v what it
// refuses; nil when it refuses anything.
func pemCertificates(field, text string, v *sluice.ValidationError) []*x509.Certificate {
	if len(text) > sluice.MaxPEMBytes {
		v.Add(field, "is %d bytes; at most %d are allowed", len(text), sluice.MaxPEMBytes)
		return nil
	}
	var certs []*x509.Certificate
	for rest := []byte(text); ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			v.Add(field, "holds a %s block: it must hold certificates alone (-----BEGIN CERTIFICATE-----)", block.Type)
			return nil
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			v.Add(field, "certificate %d is not a certificate: %s", len(certs)+1, strings.TrimPrefix(err.Error(), "x509: "))
			return nil
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		v.Add(field, "is not PEM: expected -----BEGIN CERTIFICATE-----")
	}
	return certs
}

// pemKey reads tls.client_key, an unencrypted PEM private key (PKCS #8,
// PKCS #1 or SEC 1), adding to v what it refuses; nil when it refuses it.
func pemKey(text string, v *sluice.ValidationError) []byte {
	const field = "tls.client_key"
	if len(text) > sluice.MaxPEMBytes {
		v.Add(field, "is %d bytes; at most %d are allowed", len(text), sluice.MaxPEMBytes)
		return nil
	}
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		v.Add(field, "is not PEM: expected -----BEGIN PRIVATE KEY-----")
		return nil
	}
	var err error
	switch {
	case block.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(block.Headers["Proc-Type"], "ENCRYPTED"):
		v.Add(field, "is encrypted: give it without a passphrase (Sluice keeps it encrypted)")
		return nil
	case block.Type == "PRIVATE KEY":
		_, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case block.Type == "RSA PRIVATE KEY":
		_, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case block.Type == "EC PRIVATE KEY":
		_, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		v.Add(field, "holds a %s block, not a private key", block.Type)
		return nil
	}
	if err != nil {
		v.Add(field, "is not a private key: %s", strings.TrimPrefix(err.Error(), "x509: "))
		return nil
	}
	return []byte(strings.TrimSpace(text))
}

// saveTLS saves the key of endpoint id's tls option as a request named
// in changed it to after (nothing when the request did not name tls):
// removed with the option, replaced by the key sent, or kept when the
// request sent none, if it matches the certificate. It refuses a
// certificate that has expired.
func (c *Control) saveTLS(ctx context.Context, tenantID, id uuid.UUID, in OptionsInput, after *sluice.TLSOption) error {
	if _, named := in["tls"]; !named {
		return nil
	}
	if after == nil {
		return c.store.SetEndpointTLSKey(ctx, tenantID, id, nil)
	}
	v := &sluice.ValidationError{}
	if now := c.now(); !now.Before(after.NotAfter) {
		v.Add("tls.client_certificate", "expired at %s", after.NotAfter.UTC().Format("2006-01-02 15:04:05 MST"))
		return v
	}
	if after.ClientKey != nil {
		return c.store.SetEndpointTLSKey(ctx, tenantID, id, after.ClientKey)
	}
	stored, err := c.store.EndpointTLSKey(ctx, tenantID, id)
	if err != nil {
		return err
	}
	switch {
	case stored == nil:
		v.Add("tls.client_key", "is required: the PEM private key of client_certificate")
	default:
		if _, err := tls.X509KeyPair([]byte(after.ClientCertificate), stored); err != nil {
			v.Add("tls.client_key", "is required: the stored key does not match this client_certificate")
		}
	}
	return v.Err()
}

// jsonReason is what encoding/json found wrong, without its prefix.
func jsonReason(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}

package sluice

import "time"

// TLSOption is an endpoint's mutual TLS (the delivery option tls): the
// client certificate its attempts present, and the CAs its receiver's
// certificate is checked against instead of the system roots.
type TLSOption struct {
	// ClientCertificate is the PEM certificate, then its chain.
	ClientCertificate string `json:"client_certificate"`
	// CACertificates are PEM certificates; "" for the system roots.
	CACertificates string `json:"ca_certificates,omitempty"`
	// Subject and NotAfter are read from ClientCertificate when it is
	// written, for reads and for the expiry check.
	Subject  string    `json:"client_certificate_subject"`
	NotAfter time.Time `json:"not_after"`
	// ClientKey is the PEM private key as a request gives it: write-only,
	// kept sealed in a column of its own, never in the options document;
	// nil when read, and when a request keeps the stored key.
	ClientKey []byte `json:"-"`
}

// CertificateExpiringWithin is how long before its client certificate
// expires an endpoint's owner is told (sluice.endpoint.certificate_expiring).
const CertificateExpiringWithin = 14 * 24 * time.Hour

// MaxPEMBytes bounds each PEM field of the tls option.
const MaxPEMBytes = 64 << 10

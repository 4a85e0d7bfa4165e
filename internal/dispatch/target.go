package dispatch

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Target is what a run needs to send to one endpoint: where, how signed,
// how fast, and its flow state.
type Target struct {
	ID          uuid.UUID
	TenantID    uuid.UUID
	URL         string
	Headers     map[string]string
	Keys        [][]byte // signing keys: the current secret's, then a rotated-out one still in its grace period
	MaxInFlight int
	RateLimit   *sluice.RateLimit
	Disabled    bool
	Consumer    *string // the consumer it belongs to, if any
	FIFO        bool    // ordering "fifo": its lines go one delivery at a time (fifo.go)
	Flow        Flow
	// Timeout and Retry are the endpoint's delivery options: 0 and nil
	// for the server's (Config.DeliveryTimeout, Config.Retry).
	Timeout time.Duration
	Retry   sluice.Schedule
	// Unverified: it must answer a challenge (VerifyWorker) before
	// anything else is sent to it; it counts as Disabled meanwhile.
	Unverified bool
	// SigningKeys are its Ed25519 keys while it signs v1a (the current
	// pair's, then a rotated-out one still in its grace period); Keys is
	// nil when it signs v1a alone.
	SigningKeys []ed25519.PrivateKey
	// TLS is the endpoint's client certificate (its tls option); nil
	// without one.
	TLS *send.ClientTLS
	// Auth is the endpoint's auth option with the token read with it
	// (oauth.go); nil without one.
	Auth *authTarget
	// Destination is the broker it delivers to instead of URL, its
	// sealed URL opened (FullURL); nil without one.
	Destination *sluice.Destination
}

// endpointReader turns an endpoint row into a Target: it opens the row's
// sealed secrets and reads an auth option's token, with q. That is the
// step's transaction for a locked read (StepTx.LockEndpoint), the pool for
// a plain one (DB.ReadTarget).
type endpointReader struct {
	st *store.Store
	q  *dbq.Queries
}

// reader is the step's endpointReader, in its transaction.
func (t *StepTx) reader() endpointReader { return endpointReader{st: t.st, q: t.tx.Q} }

// target reads an endpoint row, opening its signing secrets.
func (er endpointReader) target(ctx context.Context, row dbq.LockEndpointForDispatchRow) (Target, error) {
	r := row.Endpoint
	tg := Target{
		ID:          r.ID,
		TenantID:    r.TenantID,
		URL:         r.Url,
		MaxInFlight: int(r.MaxInFlight),
		RateLimit:   store.EndpointRateLimit(r),
		// A poll endpoint is read by its consumer, never sent to (package
		// poll): a run that finds one (a replay queues a dispatch) ends.
		Disabled: r.Disabled || r.Delivery == sluice.DeliveryPoll,
		Consumer: r.Consumer,
		FIFO:     r.Ordering == sluice.OrderingFIFO,
		Flow:     flowFromRow(row),
	}
	headers, err := er.st.Payloads().OpenJSON(ctx, r.TenantID, r.Headers)
	if err != nil {
		return tg, fmt.Errorf("open endpoint headers: %w", err)
	}
	if err := json.Unmarshal(headers, &tg.Headers); err != nil {
		return tg, fmt.Errorf("read endpoint headers: %w", err)
	}
	var o sluice.DeliveryOptions
	if r.Options != nil { // null while every option is the default
		if err := json.Unmarshal(r.Options, &o); err != nil {
			return tg, fmt.Errorf("read endpoint delivery options: %w", err)
		}
		tg.Timeout, tg.Retry = o.Timeout(), o.RetrySchedule
		tg.Unverified = o.Challenged() && r.VerifiedAt == nil
		tg.Disabled = tg.Disabled || tg.Unverified
		if o.TLS != nil && r.TlsKeyEnc != nil {
			tg.TLS = er.clientTLS(r, o.TLS)
		}
		if o.Destination != nil {
			full, err := er.st.OpenSecret(r.DestinationUrlEnc)
			if err != nil {
				return tg, fmt.Errorf("open endpoint destination url: %w", err)
			}
			d := *o.Destination
			d.FullURL = full
			tg.Destination = &d
		}
		if o.Auth != nil {
			a, err := er.readAuth(ctx, r.ID, *o.Auth)
			if err != nil {
				return tg, err
			}
			tg.Auth = a
		}
	}
	inGrace := r.PreviousSecretExpiresAt != nil && time.Now().Before(*r.PreviousSecretExpiresAt)
	if o.SignsV1a() {
		if err := er.openSigningKeys(&tg, r, inGrace); err != nil {
			return tg, err
		}
	}
	if !o.SignsV1() {
		return tg, nil
	}
	secrets := [][]byte{r.SecretEnc}
	if r.PreviousSecretEnc != nil && inGrace {
		secrets = append(secrets, r.PreviousSecretEnc)
	}
	for _, sealed := range secrets {
		secret, err := er.st.OpenSecret(sealed)
		if err != nil {
			return tg, fmt.Errorf("open endpoint secret: %w", err)
		}
		key, err := send.Key(string(secret))
		if err != nil {
			return tg, fmt.Errorf("read endpoint secret: %w", err)
		}
		tg.Keys = append(tg.Keys, key)
	}
	return tg, nil
}

// openSigningKeys opens the v1a key pairs of endpoint row r into tg: the
// current one, and the previous one while inGrace.
func (er endpointReader) openSigningKeys(tg *Target, r dbq.Endpoint, inGrace bool) error {
	sealed := [][]byte{r.SignKeyEnc}
	if r.PreviousSignKeyEnc != nil && inGrace {
		sealed = append(sealed, r.PreviousSignKeyEnc)
	}
	for _, s := range sealed {
		if s == nil {
			return errors.New("endpoint signs v1a but has no key pair")
		}
		key, err := er.openSigningKey(s)
		if err != nil {
			return fmt.Errorf("open endpoint signing key: %w", err)
		}
		tg.SigningKeys = append(tg.SigningKeys, key)
	}
	return nil
}

// clientTLS is endpoint r's tls option as the sender uses it: its client,
// built once per version of the endpoint (its updated_at, which every
// change of the option moves), opens the sealed key only then.
func (er endpointReader) clientTLS(r dbq.Endpoint, o *sluice.TLSOption) *send.ClientTLS {
	st, sealed := er.st, r.TlsKeyEnc
	return &send.ClientTLS{
		Endpoint: r.ID, Version: r.UpdatedAt, Certificate: o.ClientCertificate, CACertificates: o.CACertificates,
		Key: func() ([]byte, error) { return st.OpenSecret(sealed) },
	}
}

// openSigningKey opens a key pair the store sealed (its seed).
func (er endpointReader) openSigningKey(sealed []byte) (ed25519.PrivateKey, error) {
	seed, err := er.st.OpenSecret(sealed)
	if err != nil {
		return nil, fmt.Errorf("open signing key: %w", err)
	}
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("open signing key: %d bytes, not a seed", len(seed))
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

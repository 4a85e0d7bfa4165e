package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/testca"
)

// endpointForms signs in with tenant A's key and returns the browser and
// a maker of endpoint forms: a valid endpoint's fields, kv set over them.
func (b *bundle) endpointForms() (*browser, func(kv ...string) url.Values) {
	br := b.browser()
	br.login(b.keyA)
	token := br.csrf("/endpoints/new")
	return br, func(kv ...string) url.Values {
		v := url.Values{"csrf_token": {token}, "url": {"https://a.test/x"}, "max_in_flight": {"5"}, "event_types": {"*"}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
}

// TestDeliveryOptionsForm: the endpoint form sets, shows back and clears
// the delivery options, under the API's rules.
func TestDeliveryOptionsForm(t *testing.T) {
	b := setup(t)
	br, form := b.endpointForms()

	p := br.post("/endpoints", form("timeout_seconds", "soon", "retry_schedule", "5s, later"))
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, "must be a whole number of seconds from 1 to 60", `step 2 (&#34;later&#34;) is not a positive Go duration`)

	p = br.post("/endpoints", form("timeout_seconds", "15", "retry_schedule", "30s, 5m,1h"))
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	id := uuid.MustParse(regexp.MustCompile(`/endpoints/([0-9a-f-]{36})\?done=created`).FindStringSubmatch(p.Location())[1])
	ep, err := b.store.GetEndpoint(context.Background(), b.tenantA.ID, id)
	require.NoError(t, err)
	require.Equal(t, 15, *ep.TimeoutSeconds)
	require.Equal(t, sluice.Schedule{30 * time.Second, 5 * time.Minute, time.Hour}, ep.RetrySchedule)
	requireContains(t, br.get("/endpoints/"+id.String()), "15 s", "30s, 5m0s, 1h0m0s")
	requireContains(t, br.get("/endpoints/"+id.String()+"/edit"), `value="15"`, `value="30s, 5m0s, 1h0m0s"`)

	// Emptied fields give the options back to the server's defaults.
	p = br.post("/endpoints/"+id.String()+"/edit", form())
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	ep, err = b.store.GetEndpoint(context.Background(), b.tenantA.ID, id)
	require.NoError(t, err)
	require.True(t, ep.DeliveryOptions.IsZero())
	requireContains(t, br.get("/endpoints/"+id.String()), "the server&#39;s default")
}

// TestTLSForm: the form sets the tls option from its three fields, shows
// the certificate back but never the key, keeps the stored key when its
// field is left empty, and clears the option when all are.
func TestTLSForm(t *testing.T) {
	b := setup(t)
	br := b.browser()
	br.login(b.keyA)
	token := br.csrf("/endpoints/new")
	ca := testca.New(t, "clients")
	cert := ca.Issue(t, testca.Options{CommonName: "dash-client", Client: true})
	form := func(kv ...string) url.Values {
		v := url.Values{"csrf_token": {token}, "url": {"https://a.test/x"}, "max_in_flight": {"5"}, "event_types": {"*"}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}

	p := br.post("/endpoints", form("tls.client_certificate", cert.PEM))
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, "is required: the PEM private key")

	p = br.post("/endpoints", form("tls.client_certificate", cert.PEM, "tls.client_key", cert.KeyPEM, "tls.ca_certificates", ca.PEM))
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	id := uuid.MustParse(regexp.MustCompile(`/endpoints/([0-9a-f-]{36})\?done=created`).FindStringSubmatch(p.Location())[1])
	requireContains(t, br.get("/endpoints/"+id.String()), "CN=dash-client,O=Sluice tests, expires ", "own CAs")
	edit := br.get("/endpoints/" + id.String() + "/edit")
	requireContains(t, edit, "-----BEGIN CERTIFICATE-----")
	require.NotContains(t, edit.Body, "PRIVATE KEY", "the key is never shown")

	// Sent back as shown (the key field empty): the stored key stays.
	p = br.post("/endpoints/"+id.String()+"/edit", form("tls.client_certificate", cert.PEM, "tls.ca_certificates", ca.PEM))
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	key, err := b.store.EndpointTLSKey(context.Background(), b.tenantA.ID, id)
	require.NoError(t, err)
	require.Contains(t, string(key), "PRIVATE KEY")

	p = br.post("/endpoints/"+id.String()+"/edit", form())
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	ep, err := b.store.GetEndpoint(context.Background(), b.tenantA.ID, id)
	require.NoError(t, err)
	require.Nil(t, ep.TLS)
	requireContains(t, br.get("/endpoints/"+id.String()), `<dd id="client-certificate">none</dd>`)
}

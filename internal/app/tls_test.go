package app_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/egressproxy"
	"github.com/sluice-dev/sluice/internal/testkit/testca"
)

// An endpoint with the tls option presents its client certificate to a
// receiver that requires one and trusts the receiver on its own CA; the
// same receiver refuses an endpoint without one. Every attempt leaves
// through SLUICE_EGRESS_PROXY, which is asked for the IP.
func TestMutualTLSThroughEgressProxy(t *testing.T) {
	proxy := egressproxy.Start(t)
	h := start(t, map[string]string{"SLUICE_EGRESS_PROXY": proxy.URL().String(), "SLUICE_RETRY_SCHEDULE": "1h"})

	serverCA, clientCA := testca.New(t, "receivers"), testca.New(t, "sluice clients")
	seen := make(chan string, 10)
	srv := serverCA.Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !proxy.Relayed(r.RemoteAddr) {
			w.WriteHeader(http.StatusForbidden) // not through the proxy: the test fails below
			return
		}
		seen <- r.TLS.VerifiedChains[0][0].Subject.CommonName
	}), clientCA)
	cert := clientCA.Issue(t, testca.Options{CommonName: "endpoint-a", Client: true})

	var mtls struct{ ID string }
	h.call(http.MethodPost, "/v1/endpoints", map[string]any{"url": srv.URL + "/hook", "tls": map[string]string{
		"client_certificate": cert.PEM, "client_key": cert.KeyPEM, "ca_certificates": serverCA.PEM,
	}}, http.StatusCreated, &mtls)
	h.call(http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": mtls.ID, "event_types": []string{"mtls.*"}}, http.StatusCreated, nil)
	var plain struct{ ID string }
	h.call(http.MethodPost, "/v1/endpoints", map[string]any{"url": srv.URL + "/hook"}, http.StatusCreated, &plain)
	h.call(http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": plain.ID, "event_types": []string{"plain.*"}}, http.StatusCreated, nil)

	var got struct {
		TLS struct {
			Subject  string    `json:"client_certificate_subject"`
			NotAfter time.Time `json:"not_after"`
			Key      *string   `json:"client_key"`
		} `json:"tls"`
	}
	h.call(http.MethodGet, "/v1/endpoints/"+mtls.ID, nil, http.StatusOK, &got)
	require.Equal(t, "CN=endpoint-a,O=Sluice tests", got.TLS.Subject)
	require.True(t, cert.NotAfter.Equal(got.TLS.NotAfter))
	require.Nil(t, got.TLS.Key, "the key is write-only")

	for range 3 {
		h.post("mtls.sent", map[string]int{"n": 1})
	}
	h.post("plain.sent", map[string]int{"n": 1})
	eventually(t, 20*time.Second, func() bool { return len(h.deliveries("status=delivered&endpoint_id="+mtls.ID)) == 3 }, "mtls delivered")
	for range 3 {
		require.Equal(t, "endpoint-a", <-seen)
	}
	eventually(t, 20*time.Second, func() bool { return len(h.deliveries("status=failed&endpoint_id="+plain.ID)) == 1 }, "plain failed")
	var d delivery
	h.call(http.MethodGet, "/v1/deliveries/"+h.deliveries("endpoint_id=" + plain.ID)[0].ID, nil, http.StatusOK, &d)
	require.Contains(t, *d.Attempts[0].Error, "certificate", "no client certificate, and the receiver's CA unknown")

	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	port := u.Port()
	for _, a := range proxy.Asked() {
		require.Equal(t, "CONNECT 127.0.0.1:"+port, a)
	}
	require.NotEmpty(t, proxy.Asked())
}

package httpapi

import (
	"net"
	"net/http"

	"github.com/sluice-dev/sluice/internal/control"
)

// caller is who the request asks as, for the control layer: the tenant
// and actor of its credential, in its role, from its client's address.
func caller(r *http.Request) control.Caller {
	ctx := r.Context()
	return control.Caller{Tenant: tenantFrom(ctx).ID, Actor: actorFrom(ctx), Role: roleFrom(ctx), SourceIP: clientIP(r)}
}

// clientIP is the address of the request's client, "" when unknown: the
// connection's peer, or the client behind a trusted proxy
// (apirate.TrustProxies).
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

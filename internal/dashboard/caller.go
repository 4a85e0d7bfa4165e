package dashboard

import (
	"net"
	"net/http"

	"github.com/sluice-dev/sluice/internal/control"
)

// caller is who a request that passed requireSession asks as, for the
// control layer: the session's tenant, actor and role, and a portal
// session's consumer, which scopes everything it sees and changes.
func caller(r *http.Request) control.Caller {
	s, _ := sessionFromContext(r.Context())
	who := control.Caller{Tenant: s.tenant.ID, Actor: s.actor(), Role: s.role(), ReadOnly: s.readOnly, SourceIP: clientIP(r)}
	if s.consumer != nil {
		uid := s.consumer.UID
		who.Consumer = &uid
	}
	return who
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

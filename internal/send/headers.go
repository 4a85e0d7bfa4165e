package send

import (
	"net/http"
	"strconv"
)

// ReservedHeaders are the headers an endpoint's static headers cannot set,
// in canonical form: Sluice sets them on every delivery (the content type,
// the user agent naming Sluice, the Standard Webhooks headers), the HTTP
// stack owns them (Host, Content-Length), they are hop-by-hop and would
// break keep-alive or HTTP/2 (RFC 9110 §7.6.1), or they change how the
// request is sent (Expect: 100-continue would hold every body back for a
// second). The API refuses them and Send drops them, from this one list.
var ReservedHeaders = []string{
	"Content-Type", "User-Agent",
	"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature", "Webhook-Sequence",
	"Host", "Content-Length", "Expect",
	"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Te", "Trailer", "Upgrade",
	"Proxy-Authorization", "Proxy-Authenticate",
}

var reserved = func() map[string]bool {
	m := make(map[string]bool, len(ReservedHeaders))
	for _, h := range ReservedHeaders {
		m[h] = true
	}
	return m
}()

// IsReservedHeader reports whether name, in any letter case, is one of
// ReservedHeaders.
func IsReservedHeader(name string) bool {
	return reserved[http.CanonicalHeaderKey(name)]
}

// setSequence sets webhook-sequence, a delivery's number in its FIFO
// endpoint's line (docs/receiving.md), when it has one (seq > 0).
func setSequence(h http.Header, seq int64) {
	if seq > 0 {
		h.Set("Webhook-Sequence", strconv.FormatInt(seq, 10))
	}
}

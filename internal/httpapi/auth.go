package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/sluice"
)

type tenantKey struct{}

// tenantFrom returns the tenant the request authenticated as.
func tenantFrom(ctx context.Context) sluice.Tenant {
	return ctx.Value(tenantKey{}).(sluice.Tenant)
}

// authenticate resolves "Authorization: Bearer <key>" to a tenant, or
// answers 401. A revoked or expired key answers 401 within keyCacheTTL on
// every process.
func (a *API) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			writeUnauthorized(w, "send your API key as \"Authorization: Bearer sk_...\"")
			return
		}
		if !apikey.WellFormed(key) {
			writeUnauthorized(w, "the API key is not valid")
			return
		}
		tenant, ok := a.keys.get(key)
		if !ok {
			looked := time.Now()
			cred, err := a.store.AuthenticateAPIKey(r.Context(), key)
			if errors.Is(err, sluice.ErrNotFound) {
				writeUnauthorized(w, "the API key is not valid: unknown, revoked or expired")
				return
			}
			if err != nil {
				a.writeError(w, r, err)
				return
			}
			a.keys.put(key, cred, looked)
			tenant = cred.Tenant
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant)))
	})
}

func bearer(header string) (string, bool) {
	scheme, key, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	key = strings.TrimSpace(key)
	return key, key != ""
}

func writeUnauthorized(w http.ResponseWriter, detail string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
	writeProblem(w, &Problem{Type: typeUnauthorized, Title: "Unauthorized", Status: http.StatusUnauthorized, Detail: detail})
}

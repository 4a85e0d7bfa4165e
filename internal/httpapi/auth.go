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
// every process; a disabled tenant's keys are refused as soon by
// refuseDisabled.
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

// refuseDisabled answers 403 tenant-disabled to a tenant an operator has
// disabled: its key is valid (a client should not rotate it, as it would
// on a 401), the account is not. It runs after the rate limit, so the
// answer carries the RateLimit headers of every authenticated /v1 answer.
// Like a revocation, disabling takes effect within keyCacheTTL on every
// process, and so does enabling.
func refuseDisabled(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tenantFrom(r.Context()).Disabled() {
			writeProblem(w, &Problem{Type: typeTenantDisabled, Title: "Tenant disabled", Status: http.StatusForbidden,
				Detail: "this account is disabled; ask the operator of this Sluice to enable it"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

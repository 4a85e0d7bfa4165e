package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/dbwait"
	"github.com/sluice-dev/sluice/internal/sluice"
)

type (
	tenantKey struct{}
	actorKey  struct{}
	roleKey   struct{} // a sluice.Role other than an API key's (sluice.RoleOwner)
)

// tenantFrom returns the tenant the request authenticated as.
func tenantFrom(ctx context.Context) sluice.Tenant {
	return ctx.Value(tenantKey{}).(sluice.Tenant)
}

// actorFrom returns who the request acts as, for the audit log.
func actorFrom(ctx context.Context) sluice.Actor {
	a, _ := ctx.Value(actorKey{}).(sluice.Actor)
	return a
}

// roleFrom is the role the request acts in: an API key has every right.
func roleFrom(ctx context.Context) sluice.Role {
	if r, ok := ctx.Value(roleKey{}).(sluice.Role); ok {
		return r
	}
	return sluice.RoleOwner
}

// withCredential is ctx with the tenant and actor of an API key.
func withCredential(ctx context.Context, cred sluice.Credential) context.Context {
	ctx = context.WithValue(ctx, tenantKey{}, cred.Tenant)
	return context.WithValue(ctx, actorKey{}, sluice.Actor{Type: sluice.ActorAPIKey, ID: cred.APIKeyID.String(), Name: cred.APIKeyName})
}

// authenticate resolves "Authorization: Bearer <key>" to a tenant, or
// answers 401. A revoked or expired key answers 401 within keyCacheTTL on
// every process; a disabled tenant's keys are refused as soon by
// refuseDisabled.
//
// Failed authentications are limited per client address, the address's
// valid keys are not (apirate.Limits.GateAuth, docs/rate-limits.md): every
// 401 costs the address a token of its failed authentications, the bucket
// the dashboard's sign-in draws from too. An address without one still has
// a well-formed key looked up (one indexed read) when this process found
// the key valid lately, or while its bucket of failed look-ups lasts, and
// a valid key is served; a wrong one answers 429 and costs both buckets.
// Anything else from it answers 429 unlooked, so a flood of guesses costs
// the database a bounded number of reads (TestFailedAuthThrottledPerAddress,
// TestBadKeysDoNotLockOutAGoodOne).
func (a *API) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, given := bearer(r.Header.Get("Authorization"))
		wellFormed := given && apikey.WellFormed(key)
		credential := ""
		if wellFormed {
			if cred, cached := a.keys.get(key); cached {
				next.ServeHTTP(w, r.WithContext(withCredential(r.Context(), cred)))
				return
			}
			credential = key
		}
		addr := apirate.ClientPrefix(r)
		gate, res := a.limits.rate.GateAuth(addr, credential)
		if gate == apirate.GateShut {
			writeProblem(w, authThrottled(res))
			return
		}
		if !wellFormed { // GateOpen: nothing to look up
			a.limits.rate.FailAuth(addr)
			if given {
				writeUnauthorized(w, "the API key is not valid")
			} else {
				writeUnauthorized(w, "send your API key as \"Authorization: Bearer sk_...\"")
			}
			return
		}
		looked := time.Now()
		var cred sluice.Credential
		err := dbwait.Retry(r.Context(), sluice.Unavailable, func(ctx context.Context) error {
			var err error
			cred, err = a.ctl.Authenticate(ctx, key)
			return err //nolint:wrapcheck // answered by writeError as it is
		})
		if errors.Is(err, sluice.ErrNotFound) {
			if gate == apirate.GateLookUp {
				a.limits.rate.FailLookup(addr)
				writeProblem(w, authThrottled(a.limits.rate.CheckAuth(addr)))
				return
			}
			a.limits.rate.FailAuth(addr)
			writeUnauthorized(w, "the API key is not valid: unknown, revoked or expired")
			return
		}
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		a.limits.rate.Verified(key)
		a.limits.rate.NoteTenantRate(cred.Tenant.ID, cred.APIRate)
		a.keys.put(key, cred, looked)
		next.ServeHTTP(w, r.WithContext(withCredential(r.Context(), cred)))
	})
}

// authThrottled answers a client address that has failed to authenticate
// too often of late.
func authThrottled(res apirate.Result) *Problem {
	after := apirate.RetryAfter(res)
	return &Problem{Type: typeRateLimited, Title: "Too many requests", Status: http.StatusTooManyRequests,
		Detail:     fmt.Sprintf("too many failed authentications from this address; retry in %d s", after),
		RetryAfter: after}
}

// notFoundByURL answers an unauthenticated URL whose id names nothing (a
// poll URL, a JWKS): a lookup past the address's failure limit (GateLookUp)
// spends its lookup allowance and is throttled; otherwise it counts as a
// failed authentication of the address and is 404 with detail.
func (a *API) notFoundByURL(addr netip.Prefix, gate apirate.Gate, detail string) error {
	if gate == apirate.GateLookUp {
		a.limits.rate.FailLookup(addr)
		return authThrottled(a.limits.rate.CheckAuth(addr))
	}
	a.limits.rate.FailAuth(addr)
	return notFoundProblem(detail)
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

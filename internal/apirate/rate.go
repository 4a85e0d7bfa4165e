// Package apirate is the rate limit of Sluice's own doors: the API, the
// dashboard and the portal. One Limits per process holds a token bucket
// per tenant that every door draws from, a smaller one per dashboard or
// portal session, and one per client address for failed authentications.
// The tenants' buckets are shared by every process through Postgres
// (Shared), so a tenant's limit holds however many processes serve it; the
// sessions' and the addresses' buckets live in each process's memory.
package apirate

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// DefaultRate is SLUICE_API_RATE's default.
const DefaultRate = "100/s"

// maxCount bounds the number in a rate, as the tenants.api_rate check does.
const maxCount = 999_999_999

// Rate is a token bucket's refill rate and capacity.
type Rate struct {
	limit sluice.RateLimit
	text  string
}

// Parse reads a rate written "<n>/s" or "<n>/m" (n a positive integer). Its
// burst is twice the rate per second, at least 1: "100/s" and "6000/m" are
// the same limit, 100 a second with bursts of 200; a per-minute rate is for
// rates below one a second ("30/m" allows one request every 2 s).
func Parse(s string) (Rate, error) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n < 1 || n > maxCount || strings.HasPrefix(num, "+") {
		return Rate{}, fmt.Errorf("%q is not a rate such as 100/s or 6000/m", s)
	}
	var rl sluice.RateLimit
	switch unit {
	case "s":
		rl.PerSecond = n
	case "m":
		rl.PerMinute = n
	default:
		return Rate{}, fmt.Errorf("%q is not a rate such as 100/s or 6000/m: the unit is s or m", s)
	}
	rl.Burst = max(1, int(math.Ceil(2*rl.TokensPerSecond())))
	return Rate{limit: rl, text: fmt.Sprintf("%d/%s", n, unit)}, nil
}

// MustParse is Parse for rates written in code; it panics on a bad one.
func MustParse(s string) Rate {
	r, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return r
}

// WithBurst is r with another capacity, at least 1.
func (r Rate) WithBurst(burst int) Rate {
	r.limit.Burst = max(1, burst)
	return r
}

// String is the rate as Parse reads it.
func (r Rate) String() string { return r.text }

// IsZero reports whether r is the zero Rate (no rate set).
func (r Rate) IsZero() bool { return r.limit.Burst == 0 }

// Burst is the bucket's capacity: the most requests allowed at once.
func (r Rate) Burst() int { return r.limit.Burst }

// PerSecond is the refill rate in tokens per second.
func (r Rate) PerSecond() float64 { return r.limit.TokensPerSecond() }

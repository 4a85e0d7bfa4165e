package apirate

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Buckets keeps the tenants' token buckets. Shared keeps them in
// Postgres, shared by every process; without it they are kept in one
// process's memory, and each process enforces the full rate on its own.
type Buckets interface {
	// Take takes n tokens from the tenant's bucket at rate if it holds
	// them, and nothing otherwise. An error (the database cannot be
	// reached, ctx ended) comes with the bucket's last known state.
	Take(ctx context.Context, tenant uuid.UUID, rate Rate, n int) (Result, error)
	// Charge takes n tokens whether or not the bucket holds them.
	Charge(ctx context.Context, tenant uuid.UUID, rate Rate, n int) Result
}

// memoryBuckets are Buckets in this process's memory.
type memoryBuckets struct{ l *Limiter[uuid.UUID] }

func (m memoryBuckets) Take(_ context.Context, tenant uuid.UUID, rate Rate, n int) (Result, error) {
	return m.l.Take(tenant, rate, n), nil
}

func (m memoryBuckets) Charge(_ context.Context, tenant uuid.UUID, rate Rate, n int) Result {
	return m.l.Charge(tenant, rate, n)
}

// RateSource reads a tenant's own rate, as Parse reads it ("100/s"), or
// nil when it has none; *store.Store is one.
type RateSource interface {
	TenantAPIRate(ctx context.Context, tenant uuid.UUID) (*string, error)
}

// rateRecheck is how long a tenant's own rate is trusted before it is read
// again, and so how soon `sluice tenant set-rate` reaches a process.
const rateRecheck = time.Second

// maxCachedRates bounds the rate cache; past it the cache starts afresh.
const maxCachedRates = 100_000

// rateCache holds each tenant's own rate for rateRecheck, so that a busy
// tenant costs one indexed lookup a second per process.
type rateCache struct {
	source RateSource // nil: every tenant has the default
	now    func() time.Time

	mu      sync.Mutex
	entries map[uuid.UUID]cachedRate
}

type cachedRate struct {
	rate    Rate // zero: the default
	checked time.Time
}

func (c *rateCache) get(ctx context.Context, id uuid.UUID, def Rate) Rate {
	if c.source == nil {
		return def
	}
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[id]
	c.mu.Unlock()
	if !ok || now.Sub(e.checked) >= rateRecheck {
		e = cachedRate{rate: e.rate, checked: now}
		// On a failed lookup the last known rate stands; the request
		// itself will meet the database's trouble soon enough.
		if text, err := c.source.TenantAPIRate(ctx, id); err == nil {
			e.rate = parseStored(text)
		}
		c.put(id, e)
	}
	if e.rate.IsZero() {
		return def
	}
	return e.rate
}

// note keeps a tenant's own rate (nil: none), read elsewhere just now.
func (c *rateCache) note(id uuid.UUID, text *string) {
	if c.source != nil {
		c.put(id, cachedRate{rate: parseStored(text), checked: c.now()})
	}
}

func (c *rateCache) put(id uuid.UUID, e cachedRate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxCachedRates {
		clear(c.entries)
	}
	c.entries[id] = e
}

// parseStored reads tenants.api_rate; zero for none.
func parseStored(text *string) Rate {
	if text == nil {
		return Rate{}
	}
	r, _ := Parse(*text) // the column's check admits only what Parse reads
	return r
}

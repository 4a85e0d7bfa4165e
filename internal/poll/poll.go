// Package poll is pull delivery (docs/architecture.md, "Pull delivery"):
// an endpoint with delivery "poll" is read by its consumer from its poll
// URL instead of being sent its deliveries.
//
//   - poll URL: SLUICE_PUBLIC_URL/poll/<token>. The token names the
//     endpoint and carries a MAC of its id under the endpoint's current
//     signing secret (Token), so rotating the secret changes the token at
//     once and the old one stops working: revoking a poll URL is rotating
//     the secret.
//   - position: the place of a delivery in its endpoint's line, given by
//     the first read that sees it committed (readPage), never by
//     its writer: transactions commit out of order, and a place fixed at
//     insert could fall behind a cursor already read past.
//   - cursor: an opaque string naming a position (EncodeCursor). A read
//     with a cursor answers the deliveries after it and marks those up to
//     it delivered: the reader has passed them.
//   - wait: a read with ?wait= whose page is empty waits, up to MaxWait,
//     for a wake from the dispatch.Nudger, which every commit of new
//     deliveries nudges, and reads again. A waiting request holds no
//     database connection and costs nothing until woken.
package poll

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Limits of a read.
const (
	// MaxWait is the longest a read waits for deliveries (?wait=).
	MaxWait = 30 * time.Second
	// DefaultLimit and MaxLimit bound a page, as the API's lists do.
	DefaultLimit = 50
	MaxLimit     = 500
)

// Defaults of Config.
const (
	DefaultMaxWaitingPerTenant = 2000
	DefaultMaxWaiting          = 20000
)

// ErrTooManyWaiting answers a read that would wait while its tenant (or
// the process) has as many reads waiting as it may.
var ErrTooManyWaiting = errors.New("too many poll requests waiting")

// ErrBadCursor answers a cursor that is not one a read gave.
var ErrBadCursor = errors.New("cursor is not one this poll URL gave")

// Waiters is what the Reader needs of the process's dispatch.Nudger: how a
// waiting read hears of new deliveries, and how the Reader knows a
// look-up it kept is still current (kept.go).
type Waiters interface {
	JoinPoll(endpointID uuid.UUID) (wakes <-chan struct{}, leave func())
	// PollStamp names the last change this process heard of the
	// endpoint; false when it cannot hear changes.
	PollStamp(endpointID uuid.UUID) (stamp uint64, ok bool)
}

// Config configures a Reader.
type Config struct {
	Store *store.Store
	// Nudger wakes waiting reads: the process's. Nil: a read does not
	// wait, and no look-up is kept.
	Nudger Waiters
	// MaxWaitingPerTenant bounds a tenant's reads waiting at once in this
	// process, MaxWaiting the process's: a waiting read holds a goroutine
	// and a connection from its client, never one to the database.
	MaxWaitingPerTenant int
	MaxWaiting          int
}

// Resolve returns the configuration with defaults applied.
func (c Config) Resolve() Config {
	c.MaxWaitingPerTenant = cmp.Or(c.MaxWaitingPerTenant, DefaultMaxWaitingPerTenant)
	c.MaxWaiting = cmp.Or(c.MaxWaiting, DefaultMaxWaiting)
	return c
}

// A Reader answers poll reads.
type Reader struct {
	cfg Config

	mu       sync.Mutex
	waiting  map[uuid.UUID]int // by tenant
	total    int
	draining chan struct{}            // closed by Drain
	kept     map[uuid.UUID]keptTarget // by endpoint (kept.go)
	lookUps  atomic.Int64
}

// New returns a Reader.
func New(cfg Config) *Reader {
	return &Reader{
		cfg: cfg.Resolve(), waiting: map[uuid.UUID]int{}, draining: make(chan struct{}),
		kept: map[uuid.UUID]keptTarget{},
	}
}

// Drain makes waiting reads answer at once, and later ones not wait: the
// process is shutting down.
func (r *Reader) Drain() {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.draining:
	default:
		close(r.draining)
	}
}

// Token is the token of an endpoint's poll URL under its current signing
// secret: the endpoint's id and a MAC of it, so a look-up by id and a
// constant-time check authenticate it.
func Token(endpointID uuid.UUID, secret string) string {
	return hexID(endpointID) + "_" + base64.RawURLEncoding.EncodeToString(tokenMAC(endpointID, secret))
}

// URL is an endpoint's poll URL under publicURL (SLUICE_PUBLIC_URL).
func URL(publicURL string, endpointID uuid.UUID, secret string) string {
	return strings.TrimSuffix(publicURL, "/") + "/poll/" + Token(endpointID, secret)
}

func tokenMAC(endpointID uuid.UUID, secret string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("sluice poll " + endpointID.String()))
	return m.Sum(nil)
}

func hexID(id uuid.UUID) string { return strings.ReplaceAll(id.String(), "-", "") }

// parseToken returns the endpoint id and MAC of a token, or false.
func parseToken(token string) (uuid.UUID, []byte, bool) {
	idPart, macPart, ok := strings.Cut(token, "_")
	if !ok || len(idPart) != 32 {
		return uuid.Nil, nil, false
	}
	id, err := uuid.Parse(idPart)
	if err != nil {
		return uuid.Nil, nil, false
	}
	mac, err := base64.RawURLEncoding.DecodeString(macPart)
	if err != nil || len(mac) != sha256.Size {
		return uuid.Nil, nil, false
	}
	return id, mac, true
}

// target looks up the poll endpoint a token names, and says whether the
// look-up was kept (kept.go): sluice.ErrNotFound for a token that names
// none, or whose MAC does not match the endpoint's current secret.
func (r *Reader) target(ctx context.Context, id uuid.UUID, mac []byte) (Target, bool, error) {
	t, kept, err := r.lookUp(ctx, id)
	if err != nil {
		return Target{}, false, fmt.Errorf("look up poll token: %w", err)
	}
	if !t.Poll || !hmac.Equal(mac, tokenMAC(id, t.Secret)) {
		return Target{}, false, sluice.ErrNotFound
	}
	return t, kept, nil
}

// EncodeCursor is the cursor of a position.
func EncodeCursor(position int64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(position))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// DecodeCursor is the position of a cursor; "" is the start.
func DecodeCursor(cursor string) (int64, error) {
	if cursor == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) != 8 {
		return 0, ErrBadCursor
	}
	p := int64(binary.BigEndian.Uint64(b))
	if p < 0 {
		return 0, ErrBadCursor
	}
	return p, nil
}

// Request is a read: after the position of Cursor, at most Limit
// deliveries, waiting up to Wait for one when there is none.
type Request struct {
	Cursor string
	Limit  int
	Wait   time.Duration
}

// Page is a read's answer: the deliveries after the cursor, and the cursor
// to read the next page with (the same one when the page is empty).
type Page struct {
	Items []Item
	Next  string
}

// Read answers a read of the poll endpoint token names, once allow (the
// caller's rate limit) lets it through; a token that names none is
// sluice.ErrNotFound. allow is told whether the read will be answered from
// memory: with a kept look-up and nothing after its cursor, an idle
// client's re-poll, which costs the database nothing unless a wake comes.
//
// A read with a wait joins the endpoint's waiters before it looks
// anything up, so a delivery that commits after the look-up wakes it;
// it reads again on each wake until the page has something or the wait
// is over. A read that has nothing to place nor mark (the look-up says
// so: an idle client's re-poll) answers its page without a transaction,
// and with a kept look-up (kept.go) without the database.
func (r *Reader) Read(ctx context.Context, token string, req Request, allow func(t Target, fromMemory bool) error) (Page, error) {
	id, mac, ok := parseToken(token)
	if !ok {
		return Page{}, sluice.ErrNotFound
	}
	after, err := DecodeCursor(req.Cursor)
	if err != nil {
		return Page{}, err
	}
	limit := cmp.Or(req.Limit, DefaultLimit)
	wait := min(req.Wait, MaxWait)
	if r.cfg.Nudger == nil {
		wait = 0
	}
	var wakes <-chan struct{}
	if wait > 0 {
		var leave func()
		wakes, leave = r.cfg.Nudger.JoinPoll(id)
		defer leave()
	}
	t, kept, err := r.target(ctx, id, mac)
	if err != nil {
		return Page{}, err
	}
	quiet := !t.Unplaced && after <= t.ReadPosition // as of the look-up
	if err := allow(t, kept && quiet && after >= t.LastPosition); err != nil {
		return Page{}, err
	}
	if wait > 0 {
		if err := r.admit(t.TenantID); err != nil {
			return Page{}, err
		}
		defer r.release(t.TenantID)
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		var items []Item
		switch {
		case quiet && after >= t.LastPosition:
			// An idle client's re-poll: nothing after its cursor.
		case quiet:
			// Nothing to write: the page is read alone, in one round trip.
			var rows []dbq.PollPageRow
			rows, err = r.cfg.Store.OneShot(nil).PollPage(ctx, dbq.PollPageParams{EndpointID: id, After: after, MaxRows: int32(limit), MaxBytes: sluice.MaxPageBytes})
			items = pollItems(rows)
		default:
			var marked int64
			items, marked, err = readPage(ctx, r.cfg.Store, id, after, limit)
			metrics.PollDelivered.Add(float64(marked))
			r.Forget(id) // its positions moved
		}
		if err == nil {
			err = openItems(ctx, r.cfg.Store.Payloads(), t.TenantID, items)
		}
		if errors.Is(err, errCursorAhead) {
			return Page{}, ErrBadCursor
		}
		if err != nil {
			return Page{}, fmt.Errorf("read poll page: %w", err)
		}
		if len(items) > 0 || wait <= 0 {
			return page(items, after), nil
		}
		select {
		case <-wakes:
			quiet = false // something committed: place it
		case <-deadline.C:
			return page(nil, after), nil
		case <-r.draining:
			return page(nil, after), nil
		case <-ctx.Done():
			return Page{}, ctx.Err() //nolint:wrapcheck // the context's own error: callers compare it
		}
	}
}

func page(items []Item, after int64) Page {
	next := after
	if len(items) > 0 {
		next = items[len(items)-1].Position
	}
	if items == nil {
		items = []Item{}
	}
	return Page{Items: items, Next: EncodeCursor(next)}
}

// admit counts a waiting read of the tenant, or refuses it past the limits
// or while draining.
func (r *Reader) admit(tenant uuid.UUID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waiting[tenant] >= r.cfg.MaxWaitingPerTenant || r.total >= r.cfg.MaxWaiting {
		return ErrTooManyWaiting
	}
	r.waiting[tenant]++
	r.total++
	metrics.PollWaiting.Inc()
	return nil
}

// Waiting is how many reads are waiting now.
func (r *Reader) Waiting() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

func (r *Reader) release(tenant uuid.UUID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total--
	metrics.PollWaiting.Dec()
	if r.waiting[tenant]--; r.waiting[tenant] == 0 {
		delete(r.waiting, tenant)
	}
}

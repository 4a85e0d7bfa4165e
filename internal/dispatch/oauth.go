package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// The auth delivery option: an OAuth2 access token on every attempt,
// shared by every worker process through the endpoint's endpoint_auth row
// (not a cache per process). A claim step reads the row with the target
// (only for an endpoint with the option). An attempt uses the token it
// read until its refresh time, a margin before it expires
// (sluice.TokenRefreshMargin); then one process takes the row's lease
// (refreshing_until, one attempt's timeout long, and the fetch ends within
// it), fetches the next token and saves it, while the others use the old
// token if it is still valid, or wait for the new one, re-reading the row.
// The lease is data, not a lock held by a session: a process that dies
// while fetching leaves it to expire, and a process waiting for it takes
// it over the moment it ends, so the endpoint is without a token for at
// most one attempt's timeout. A receiver's 401 gets one fresh token and
// one resend inside the same attempt.

// authTarget is an endpoint's auth option with the token read with it.
type authTarget struct {
	endpoint uuid.UUID
	opt      sluice.AuthOption

	mu        sync.Mutex // the token below, replaced when an attempt of the batch fetches the next
	token     string     // "" when there is none yet
	gen       int64
	refreshAt time.Time
}

// current is the token an attempt may send now without asking the store,
// and its generation; "" when it is due.
func (a *authTarget) current(now time.Time) (string, int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token == "" || !now.Before(a.refreshAt) {
		return "", 0
	}
	return a.token, a.gen
}

func (a *authTarget) set(tok string, gen int64, refreshAt time.Time) {
	a.mu.Lock()
	a.token, a.gen, a.refreshAt = tok, gen, refreshAt
	a.mu.Unlock()
}

// readAuth reads the shared token of endpoint id, whose auth option is
// o.
func (er endpointReader) readAuth(ctx context.Context, id uuid.UUID, o sluice.AuthOption) (*authTarget, error) {
	a := &authTarget{endpoint: id, opt: o}
	row, err := er.q.EndpointToken(ctx, id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return a, nil // an attempt says what is missing
	case err != nil:
		return nil, fmt.Errorf("read endpoint token: %w", err)
	case row.TokenEnc == nil || row.RefreshAt == nil:
		return a, nil
	}
	tok, err := er.st.OpenSecret(row.TokenEnc)
	if err != nil {
		return nil, fmt.Errorf("open endpoint token: %w", err)
	}
	a.set(string(tok), row.Generation, *row.RefreshAt)
	return a, nil
}

// tokens fetches endpoints' tokens for a worker: one fetch at a time per
// endpoint in the process (flights), one across processes (the lease).
type tokens struct {
	q      *dbq.Queries // each statement alone, on the pool
	st     *store.Store
	sender *send.Sender
	clock  Clock

	mu      sync.Mutex
	flights map[uuid.UUID]*tokenFlight
}

// tokenFlight is one process's wait for an endpoint's next token.
type tokenFlight struct {
	done chan struct{}
	tok  string
	gen  int64
	err  error
}

// tokenPoll is how often a process waiting for another's fetch re-reads
// the endpoint's row for the token it saves. The wait before the lease's
// end is cut short to end with it (leaseWait).
const tokenPoll = 50 * time.Millisecond

// leaseWait is how long a process that could not take the lease waits
// before it reads the row and tries again, at now: tokenPoll, or less so
// as to try the moment the lease read (until) ends. At least a
// millisecond, so that a lease read as just ended is not a busy loop.
func leaseWait(now time.Time, until *time.Time) time.Duration {
	if until == nil {
		return tokenPoll
	}
	return max(min(tokenPoll, until.Sub(now)), time.Millisecond)
}

func newTokens(st *store.Store, sender *send.Sender, clock Clock) *tokens {
	return &tokens{q: st.OneShot(nil), st: st, sender: sender, clock: clock, flights: map[uuid.UUID]*tokenFlight{}}
}

// bearer is the token an attempt of a's endpoint sends, and its
// generation: the one read with the target until its refresh time, else
// the next one; with rejected >= 0, one newer than generation rejected
// (refused by the receiver). timeout is the attempt's, which bounds a
// fetch and its lease.
func (ts *tokens) bearer(ctx context.Context, a *authTarget, rejected int64, timeout time.Duration) (string, int64, error) {
	if rejected < 0 {
		if tok, gen := a.current(ts.clock.Now()); tok != "" {
			return tok, gen, nil
		}
	}
	ts.mu.Lock()
	f, joined := ts.flights[a.endpoint]
	if !joined {
		f = &tokenFlight{done: make(chan struct{})}
		ts.flights[a.endpoint] = f
	}
	ts.mu.Unlock()
	if joined {
		select {
		case <-f.done:
		case <-ctx.Done():
			return "", 0, fmt.Errorf("waiting for a token: %w", ctx.Err())
		}
		if f.err != nil || f.gen != rejected {
			return f.tok, f.gen, f.err
		}
		// The flight joined was for the token now rejected: ask again.
		return ts.bearer(ctx, a, rejected, timeout)
	}
	f.tok, f.gen, f.err = ts.next(ctx, a, rejected, timeout)
	ts.mu.Lock()
	delete(ts.flights, a.endpoint)
	ts.mu.Unlock()
	close(f.done)
	return f.tok, f.gen, f.err
}

// tokenLease is how long a token fetch holds its endpoint's lease: three
// quarters of an attempt's timeout, so that when its process dies holding
// it, the process waiting on it takes it over (leaseWait) and asks again
// within one attempt's timeout of the first request.
func tokenLease(timeout time.Duration) time.Duration { return timeout * 3 / 4 }

// next is a's endpoint's next token: fetched under the lease, or the one
// another process holds it for (its still-valid old token meanwhile).
func (ts *tokens) next(ctx context.Context, a *authTarget, rejected int64, timeout time.Duration) (string, int64, error) {
	for {
		now := ts.clock.Now()
		until := now.Add(tokenLease(timeout))
		lease, err := ts.q.TakeTokenRefresh(ctx, dbq.TakeTokenRefreshParams{
			Until: until, EndpointID: a.endpoint, Now: now, Rejected: rejected,
		})
		switch {
		case err == nil:
			return ts.fetch(ctx, a, lease, until, timeout)
		case !errors.Is(err, pgx.ErrNoRows):
			return "", 0, fmt.Errorf("take token refresh: %w", err)
		}
		row, err := ts.q.EndpointToken(ctx, a.endpoint)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", 0, errors.New("the endpoint's auth option has no client secret")
		}
		if err != nil {
			return "", 0, fmt.Errorf("read endpoint token: %w", err)
		}
		if row.TokenEnc != nil && row.Generation != rejected && row.ExpiresAt != nil && now.Before(*row.ExpiresAt) {
			tok, err := ts.st.OpenSecret(row.TokenEnc)
			if err != nil {
				return "", 0, fmt.Errorf("open endpoint token: %w", err)
			}
			if now.Before(*row.RefreshAt) {
				a.set(string(tok), row.Generation, *row.RefreshAt)
			}
			return string(tok), row.Generation, nil
		}
		// Another process is fetching the first token, or the one after
		// a rejected or expired one: wait for it, or for its lease to end.
		wait, stop := ts.clock.After(leaseWait(ts.clock.Now(), row.RefreshingUntil))
		select {
		case <-wait:
			stop()
		case <-ctx.Done():
			stop()
			return "", 0, fmt.Errorf("waiting for another process's token: %w", ctx.Err())
		}
	}
}

// fetch asks the token endpoint for a token under the lease taken until
// until, and saves it for every process; a failure frees the lease.
func (ts *tokens) fetch(ctx context.Context, a *authTarget, lease dbq.TakeTokenRefreshRow, until time.Time, timeout time.Duration) (string, int64, error) {
	secret, err := ts.st.OpenSecret(lease.SecretEnc)
	if err != nil {
		return "", 0, fmt.Errorf("open client secret: %w", err)
	}
	asked := ts.clock.Now()
	tok, err := ts.sender.FetchToken(ctx, send.TokenRequest{
		URL: a.opt.TokenURL, ClientID: a.opt.ClientID, ClientSecret: secret,
		Scope: a.opt.Scope, Audience: a.opt.Audience, Timeout: timeout,
		// The lease's end on the sender's clock: a fetch outliving its
		// lease would race the process that takes the lease over.
		Deadline: time.Now().Add(until.Sub(asked)),
	})
	if err != nil {
		// The lease is freed even when the run is cut short.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		if rerr := ts.q.ReleaseTokenRefresh(rctx, dbq.ReleaseTokenRefreshParams{
			EndpointID: a.endpoint, Generation: lease.Generation, Until: until,
		}); rerr != nil {
			return "", 0, errors.Join(err, fmt.Errorf("release token refresh: %w", rerr))
		}
		return "", 0, err //nolint:wrapcheck // a *send.TokenError, the attempt's error as it is
	}
	lifetime := cmp.Or(tok.Lifetime, sluice.DefaultTokenLifetime)
	expires := asked.Add(lifetime)
	refresh := expires.Add(-sluice.TokenRefreshMargin(lifetime))
	n, err := ts.q.SaveToken(ctx, dbq.SaveTokenParams{
		TokenEnc: ts.st.SealSecret([]byte(tok.AccessToken)), ExpiresAt: expires, RefreshAt: refresh,
		EndpointID: a.endpoint, Generation: lease.Generation,
	})
	if err != nil {
		return "", 0, fmt.Errorf("save endpoint token: %w", err)
	}
	gen := lease.Generation + 1
	if n == 1 { // else the option changed meanwhile: this attempt still uses the token
		a.set(tok.AccessToken, gen, refresh)
	}
	return tok.AccessToken, gen, nil
}

// sendAuthed makes one attempt of m to target: with its endpoint's
// token when it has the auth option, and, when the receiver answers 401,
// once more with a fresh token; a second 401 is the attempt's answer. A
// failing token request is the attempt's failure, naming the token
// endpoint, with its answer's first KiB as the body.
func (w *Worker) sendAuthed(ctx context.Context, target Target, m send.Message) send.Result {
	if target.Auth == nil {
		return w.cfg.Sender.Send(ctx, m)
	}
	timeout := cmp.Or(target.Timeout, w.cfg.DeliveryTimeout)
	start := time.Now()
	tok, gen, err := w.tokens.bearer(ctx, target.Auth, -1, timeout)
	if err != nil {
		return tokenFailure(start, err)
	}
	m.Bearer = tok
	res := w.cfg.Sender.Send(ctx, m)
	if res.StatusCode != http.StatusUnauthorized {
		return res
	}
	if tok, _, err = w.tokens.bearer(ctx, target.Auth, gen, timeout); err != nil {
		return tokenFailure(start, err)
	}
	m.Bearer = tok
	return w.cfg.Sender.Send(ctx, m)
}

// tokenFailure is the result of an attempt whose token could not be had.
func tokenFailure(start time.Time, err error) send.Result {
	res := send.Result{At: start, Latency: time.Since(start), Err: err.Error()}
	var te *send.TokenError
	if errors.As(err, &te) {
		res.Body = te.Body
	}
	return res
}

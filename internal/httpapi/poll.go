package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/poll"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// readPoll serves GET /poll/{token}: the token is the credential. A token
// that names no poll endpoint (or not under its current secret) answers
// 404 and costs the client's address a failed authentication, and past
// the address's limit is treated as an API key is (authenticate: a known
// or affordable token is looked up, a wrong one answers 429); a good one
// draws a token from its poll URL's bucket and, unless it is answered from
// memory (poll.Reader.Read), from its tenant's (apirate.TakePollURL).
func (a *API) readPoll(w http.ResponseWriter, r *http.Request) error {
	addr := apirate.ClientPrefix(r)
	token := chi.URLParam(r, "token")
	gate, res := a.limits.rate.GateAuth(addr, token)
	if gate == apirate.GateShut {
		return authThrottled(res)
	}
	req, err := pollRequest(r)
	if err != nil {
		return err
	}
	allow := func(t poll.Target, fromMemory bool) error {
		a.limits.rate.Verified(token)
		if t.TenantDisabled {
			return &Problem{Type: typeTenantDisabled, Title: "Tenant disabled", Status: http.StatusForbidden,
				Detail: "this account is disabled; ask the operator of this Sluice to enable it"}
		}
		res := a.limits.rate.TakePollURL(r.Context(), t.TenantID, t.EndpointID, 1)
		setRateHeaders(w.Header(), res)
		if !res.Allowed {
			after := apirate.RetryAfter(res)
			return &Problem{Type: typeRateLimited, Title: "Too many requests", Status: http.StatusTooManyRequests,
				Detail: fmt.Sprintf("this poll URL is read faster than its tenant's rate limit allows; retry in %d s", after), RetryAfter: after}
		}
		if fromMemory {
			return nil
		}
		res, err := a.limits.rate.TakeTenant(r.Context(), t.TenantID, 1)
		setRateHeaders(w.Header(), res)
		if err != nil {
			return err
		}
		if !res.Allowed {
			return rateLimited(res)
		}
		return nil
	}
	page, err := a.poll.Read(r.Context(), token, req, allow)
	if errors.Is(err, sluice.ErrNotFound) {
		return a.notFoundByURL(addr, gate, "no poll endpoint has this URL: it is wrong, or its secret was rotated")
	}
	switch {
	case err != nil && r.Context().Err() != nil:
		return nil // the client is gone; no one reads an answer
	case errors.Is(err, poll.ErrBadCursor):
		v := &sluice.ValidationError{}
		v.Add("cursor", "is not a cursor this poll URL returned")
		return v
	case errors.Is(err, poll.ErrTooManyWaiting):
		return &Problem{Type: typeRateLimited, Title: "Too many requests", Status: http.StatusTooManyRequests,
			Detail: "this tenant has as many poll requests waiting as it may; retry, or read without wait", RetryAfter: 1}
	case err != nil:
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(pollPageJSON(page))
	return nil
}

// pollPageJSON is a poll page's answer, {"data": [...], "next_cursor"},
// each item of data byte for byte the Standard Webhooks body a push
// endpoint is sent (sluice.WebhookBody), so a client can forward it as it is
// (sluice listen). encoding/json would compact and escape the payload.
func pollPageJSON(page poll.Page) []byte {
	b := []byte(`{"data":[`)
	for i, it := range page.Items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, sluice.WebhookBody(it.EventID, it.Type, it.CreatedAt, it.Payload)...)
	}
	b = append(b, `],"next_cursor":`...)
	b = strconv.AppendQuote(b, page.Next) // base64url: nothing to escape
	return append(b, "}\n"...)
}

// pollRequest reads ?cursor=, ?limit= and ?wait= (whole seconds, at most
// poll.MaxWait).
func pollRequest(r *http.Request) (poll.Request, error) {
	v := &sluice.ValidationError{}
	q := r.URL.Query()
	req := poll.Request{Cursor: q.Get("cursor"), Limit: poll.DefaultLimit}
	if raw := q.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > poll.MaxLimit {
			v.Add("limit", "must be an integer from 1 to %d", poll.MaxLimit)
		}
		req.Limit = n
	}
	if raw := q.Get("wait"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 0 || n > int(poll.MaxWait/time.Second) {
			v.Add("wait", "must be a whole number of seconds from 0 to %d", int(poll.MaxWait/time.Second))
		}
		req.Wait = time.Duration(n) * time.Second
	}
	if _, err := poll.DecodeCursor(req.Cursor); err != nil {
		v.Add("cursor", "is not a cursor this poll URL returned")
	}
	if err := v.Err(); err != nil {
		return poll.Request{}, err
	}
	return req, nil
}

package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/sluice-dev/sluice/internal/dbwait"
	"github.com/sluice-dev/sluice/internal/ingest"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// Problem types: stable URIs clients may switch on.
const (
	problemBase          = "https://sluice.dev/problems/"
	typeValidation       = problemBase + "validation"
	typeMalformedJSON    = problemBase + "malformed-json"
	typeBadRequest       = problemBase + "bad-request"
	typeUnauthorized     = problemBase + "unauthorized"
	typeTenantDisabled   = problemBase + "tenant-disabled"
	typeForbidden        = problemBase + "forbidden"
	typeNotFound         = problemBase + "not-found"
	typeMethodNotAllowed = problemBase + "method-not-allowed"
	typeConflict         = problemBase + "conflict"
	typeTooLarge         = problemBase + "payload-too-large"
	typeRateLimited      = problemBase + "rate-limited"
	typeUnavailable      = problemBase + "unavailable"
	typeInternal         = problemBase + "internal"
)

// Problem is an RFC 9457 problem detail, and an error handlers may return.
type Problem struct {
	Type   string              `json:"type"`
	Title  string              `json:"title"`
	Status int                 `json:"status"`
	Detail string              `json:"detail,omitempty"`
	Errors []sluice.FieldError `json:"errors,omitempty"`
	// RetryAfter, in seconds, is sent as the Retry-After header when set.
	RetryAfter int `json:"-"`
}

// Error implements error.
func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

func badRequest(detail string) *Problem {
	return &Problem{Type: typeBadRequest, Title: "Bad request", Status: http.StatusBadRequest, Detail: detail}
}

// unavailableRetryAfter is the Retry-After, in seconds, of an answer made
// while the database cannot be reached.
const unavailableRetryAfter = 1

func unavailableProblem() *Problem {
	return &Problem{Type: typeUnavailable, Title: "Service unavailable", Status: http.StatusServiceUnavailable,
		Detail: "the database cannot be reached right now; retry shortly", RetryAfter: unavailableRetryAfter}
}

// timeoutProblem is the answer to a request that reached its bound on
// waiting for the database (dbwait), or whose event was still being
// committed when it did (ingest.ErrOutcomeUnknown); nil for any other
// failure. Once a commit was sent the request may have taken effect, and
// the answer says so: a retry with the same Idempotency-Key is safe.
func (a *API) timeoutProblem(ctx context.Context, err error) *Problem {
	var detail string
	switch {
	case errors.Is(err, ingest.ErrOutcomeUnknown), dbwait.Exceeded(ctx) && dbwait.CommitSent(ctx):
		detail = fmt.Sprintf("the database did not confirm the commit within %s: the request may or may not have taken effect; "+
			"retrying it with the same Idempotency-Key is safe", a.cfg.DBTimeout)
	case dbwait.Exceeded(ctx):
		detail = fmt.Sprintf("the database did not answer within %s; the request was not carried out; retry shortly", a.cfg.DBTimeout)
	default:
		return nil
	}
	return &Problem{Type: typeUnavailable, Title: "Service unavailable", Status: http.StatusServiceUnavailable,
		Detail: detail, RetryAfter: unavailableRetryAfter}
}

func notFoundProblem(detail string) *Problem {
	return &Problem{Type: typeNotFound, Title: "Not found", Status: http.StatusNotFound, Detail: detail}
}

// problemFor is the one table from errors to responses.
func problemFor(err error) *Problem {
	var (
		p *Problem
		v *sluice.ValidationError
	)
	switch {
	case errors.As(err, &p):
		return p
	case errors.As(err, &v):
		return &Problem{Type: typeValidation, Title: "Validation failed", Status: http.StatusUnprocessableEntity,
			Detail: "one or more fields are invalid", Errors: v.Fields}
	case errors.Is(err, sluice.ErrForbidden):
		return &Problem{Type: typeForbidden, Title: "Forbidden", Status: http.StatusForbidden, Detail: err.Error()}
	case errors.Is(err, sluice.ErrNotFound):
		return notFoundProblem("no such object")
	case errors.Is(err, sluice.ErrConflict):
		return &Problem{Type: typeConflict, Title: "Conflict", Status: http.StatusConflict, Detail: err.Error()}
	case sluice.Unavailable(err):
		return unavailableProblem()
	case sluice.RowRejected(err):
		// Input checks should refuse such data first; if some slips
		// through, it is still this request's fault, and fails it alone.
		return &Problem{Type: typeValidation, Title: "Validation failed", Status: http.StatusUnprocessableEntity,
			Detail: "the request holds data the database cannot store"}
	default:
		return nil
	}
}

// handle adapts a handler that returns an error into an http.HandlerFunc
// that answers the error as a problem.
func (a *API) handle(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			a.writeError(w, r, err)
		}
	}
}

func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	p := problemFor(err)
	if p == nil || p.Status == http.StatusServiceUnavailable {
		if t := a.timeoutProblem(r.Context(), err); t != nil {
			p = t
		}
	}
	switch {
	case p == nil:
		a.logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		p = &Problem{Type: typeInternal, Title: "Internal error", Status: http.StatusInternalServerError,
			Detail: "the server failed to handle the request; it has been logged"}
	case p.Status == http.StatusServiceUnavailable:
		a.logger.WarnContext(r.Context(), "database unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeProblem(w, p)
}

func writeProblem(w http.ResponseWriter, p *Problem) {
	w.Header().Set("Content-Type", "application/problem+json")
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func routeNotFound(w http.ResponseWriter, r *http.Request) error {
	return notFoundProblem("no route " + r.Method + " " + r.URL.Path)
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request) error {
	return &Problem{Type: typeMethodNotAllowed, Title: "Method not allowed", Status: http.StatusMethodNotAllowed,
		Detail: r.Method + " is not allowed on " + r.URL.Path}
}

package dashboard

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// pageError is an error a handler answers with a page of its own status.
type pageError struct {
	status int
	title  string
	detail string
	// retryAfter, in seconds, is sent as the Retry-After header when set.
	retryAfter int
}

// Error implements error.
func (e *pageError) Error() string { return e.title + ": " + e.detail }

func errNotFound() *pageError {
	return &pageError{status: http.StatusNotFound, title: "Not found",
		detail: "There is nothing here, or it belongs to another account."}
}

func errForbidden(detail string) *pageError {
	return &pageError{status: http.StatusForbidden, title: "Forbidden", detail: detail}
}

// errReadOnly answers a read-only session's attempt to change something.
func errReadOnly() *pageError {
	return errForbidden("This portal link is read-only: it can look but not change anything.")
}

// errRole answers a member's attempt at what its role does not allow
// (sluice.Role.Allows).
func errRole(role sluice.Role) *pageError {
	return errForbidden("Your role (" + string(role) + ") may not do this. Ask an owner of this account if you need to.")
}

// errInvalidLink answers a portal link that is malformed, forged, expired
// or revoked, or whose consumer is gone.
func errInvalidLink() *pageError {
	return &pageError{status: http.StatusForbidden, title: "Portal link not valid",
		detail: "This portal link is not valid: it has expired, was revoked, or was copied incompletely. Ask for a new link."}
}

func errBadRequest(detail string) *pageError {
	return &pageError{status: http.StatusBadRequest, title: "Bad request", detail: detail}
}

// errUnavailable is the page of a request made while the database cannot
// be reached.
func errUnavailable() *pageError {
	return &pageError{status: http.StatusServiceUnavailable, title: "Temporarily unavailable",
		detail: "Sluice cannot reach its database right now. Try again in a moment.", retryAfter: 1}
}

// pageErrorFor is the one table from errors to error pages; nil means an
// internal error.
func pageErrorFor(err error) *pageError {
	var (
		pe        *pageError
		forbidden *sluice.ForbiddenError
		invalid   *sluice.ValidationError
	)
	switch {
	case errors.As(err, &pe):
		return pe
	case errors.As(err, &invalid):
		return errBadRequest(invalidDetail(invalid))
	case errors.As(err, &forbidden):
		if forbidden.ReadOnly {
			return errReadOnly()
		}
		return errRole(sluice.Role(forbidden.Role))
	case errors.Is(err, sluice.ErrNotFound):
		return errNotFound()
	case errors.Is(err, sluice.ErrConflict):
		return &pageError{status: http.StatusConflict, title: "Not possible now", detail: conflictDetail(err)}
	case sluice.Unavailable(err):
		return errUnavailable()
	default:
		return nil
	}
}

// handle adapts a handler that returns an error into an http.HandlerFunc
// that answers the error with an error page.
func (d *Dashboard) handle(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			d.writeError(w, r, err)
		}
	}
}

func (d *Dashboard) writeError(w http.ResponseWriter, r *http.Request, err error) {
	pe := pageErrorFor(err)
	switch {
	case pe == nil:
		if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
			return // the browser went away
		}
		d.logger.ErrorContext(r.Context(), "dashboard request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		pe = &pageError{status: http.StatusInternalServerError, title: "Something went wrong",
			detail: "The server failed to show this page; the error has been logged."}
	case pe.status == http.StatusServiceUnavailable:
		d.logger.WarnContext(r.Context(), "dashboard: database unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if pe.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(pe.retryAfter))
	}
	v := web.ErrorView{Status: pe.status, Title: pe.title, Detail: pe.detail}
	if rerr := d.render(w, r, pe.status, web.ErrorPage(chrome(r, ""), v)); rerr != nil {
		d.logger.ErrorContext(r.Context(), "dashboard error page failed", "err", rerr)
		http.Error(w, pe.title, pe.status)
	}
}

// notFound answers paths no route knows, inside the signed-in chrome when
// the request carries a session.
func (d *Dashboard) notFound(w http.ResponseWriter, r *http.Request) error {
	if s, ok := d.sessionFrom(r); ok {
		r = r.WithContext(withSession(r.Context(), s))
	}
	d.writeError(w, r, errNotFound())
	return nil
}

// conflictDetail is a conflict's message as a sentence, without the
// "conflict: " prefix of sluice.ErrConflict.
func conflictDetail(err error) string {
	msg := strings.TrimPrefix(err.Error(), sluice.ErrConflict.Error()+": ")
	if msg == "" {
		return "The request conflicts with the current state."
	}
	return strings.ToUpper(msg[:1]) + msg[1:] + "."
}

// invalidDetail is a refused input's fields as sentences, for a request
// whose page has no form to show them beside ("Until must be after
// since.").
func invalidDetail(v *sluice.ValidationError) string {
	parts := make([]string, len(v.Fields))
	for i, f := range v.Fields {
		msg := f.Field + " " + f.Message
		parts[i] = strings.ToUpper(msg[:1]) + msg[1:] + "."
	}
	return strings.Join(parts, " ")
}

package sluice

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotFound reports that an object does not exist or belongs to another
// tenant; callers cannot tell the two apart, by design.
var ErrNotFound = errors.New("not found")

// ErrConflict reports that a request clashes with the current state.
var ErrConflict = errors.New("conflict")

// ErrMailNotConfigured reports an operation that emails a link (inviting
// a member, a password reset) on a server that has no way to send it.
var ErrMailNotConfigured = fmt.Errorf("%w: email is not configured on this server (SLUICE_SMTP_URL is not set), "+
	"so invitation and password-reset links cannot be sent; ask its operator to set SLUICE_SMTP_URL", ErrConflict)

// FieldError is one failing field of a validation error.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ValidationError lists every field of an input that failed validation.
type ValidationError struct {
	Fields []FieldError
}

// Error implements error.
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return "invalid input: " + strings.Join(parts, "; ")
}

// Add records a failing field.
func (e *ValidationError) Add(field, format string, args ...any) {
	e.Fields = append(e.Fields, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Err returns e when it holds at least one field, nil otherwise.
func (e *ValidationError) Err() error {
	if len(e.Fields) == 0 {
		return nil
	}
	return e
}

// ErrForbidden reports that the caller may not do what it asked: its role
// does not allow the action, or its session changes nothing. Match it with
// errors.Is; the error itself is a *ForbiddenError.
var ErrForbidden = errors.New("forbidden")

// ForbiddenError names the action a role may not perform.
type ForbiddenError struct {
	Role   string
	Action string
	// ReadOnly is a session that changes nothing whatever its role.
	ReadOnly bool
}

// Error implements error.
func (e *ForbiddenError) Error() string {
	if e.ReadOnly {
		return "this session is read-only (" + e.Action + ")"
	}
	return "the " + e.Role + " role may not do this (" + e.Action + ")"
}

// Is makes errors.Is(err, ErrForbidden) hold.
func (e *ForbiddenError) Is(target error) bool { return target == ErrForbidden }

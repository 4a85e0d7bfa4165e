package httpapi

import (
	"net/http"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/textcheck"
)

// checkedHeaders are the request headers the API reads as text.
var checkedHeaders = []string{"Idempotency-Key"}

// checkText refuses, with 400, a request whose path, query parameters or
// checked headers are not valid UTF-8 or hold a NUL character, before any
// handler can pass them to the database. Bodies are checked by decodeJSON.
func (a *API) checkText(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := requestTextProblem(r); p != nil {
			writeProblem(w, p)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func requestTextProblem(r *http.Request) *Problem {
	if msg := textcheck.String(r.URL.Path); msg != "" {
		return badRequest("the path " + msg)
	}
	if r.URL.RawQuery != "" {
		if name, msg := textcheck.Values(r.URL.Query()); msg != "" {
			return badRequest("query parameter " + name + " " + msg)
		}
	}
	for _, h := range checkedHeaders {
		for _, v := range r.Header.Values(h) {
			if msg := textcheck.String(v); msg != "" {
				return badRequest("header " + h + " " + msg)
			}
		}
	}
	return nil
}

// checkBodyText refuses a body that is not UTF-8 JSON text (400), before it
// is decoded, so nothing is silently replaced with U+FFFD.
func checkBodyText(body []byte) error {
	if msg := textcheck.JSON(body); msg != "" {
		return &Problem{Type: typeMalformedJSON, Title: "Malformed JSON", Status: http.StatusBadRequest, Detail: msg}
	}
	return nil
}

// checkFieldText refuses (422) decoded string fields holding NUL, naming
// each by its JSON path.
func checkFieldText(dst any) error {
	v := &sluice.ValidationError{}
	textcheck.Fields(dst, func(path, msg string) { v.Add(path, "%s", msg) })
	return v.Err()
}

package dashboard

import (
	"net/http"

	"github.com/sluice-dev/sluice/internal/textcheck"
)

// checkText refuses, with a 400 page, a request whose path, query
// parameters or form fields are not valid UTF-8 or hold a NUL character,
// before any handler can pass them to the database. It parses POST forms
// (bounded by formLimit) to see them; handlers find them parsed.
func (d *Dashboard) checkText(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := requestTextError(w, r); err != nil {
			d.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func requestTextError(w http.ResponseWriter, r *http.Request) error {
	if msg := textcheck.String(r.URL.Path); msg != "" {
		return errBadRequest("The address " + msg + ".")
	}
	if name, msg := textcheck.Values(r.URL.Query()); msg != "" {
		return errBadRequest("The query parameter " + name + " " + msg + ".")
	}
	if r.Method != http.MethodPost {
		return nil
	}
	r.Body = http.MaxBytesReader(w, r.Body, formLimit(r))
	if err := r.ParseForm(); err != nil {
		return errBadRequest("The form could not be read.")
	}
	if name, msg := textcheck.Values(r.PostForm); msg != "" {
		return errBadRequest("The form field " + name + " " + msg + ".")
	}
	return nil
}

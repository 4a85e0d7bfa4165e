package dashboard_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTextHygiene checks that text Postgres cannot store — invalid UTF-8,
// NUL — in a query, a form or the path is refused with a 400 page naming
// where it was, signed in or not.
func TestTextHygiene(t *testing.T) {
	b := setup(t)
	s := b.seed(b.tenantA, "https://example.com/hook", true)
	br := b.browser()
	br.login(b.keyA)
	csrf := br.csrf("/")
	replay := "/endpoints/" + s.endpoint.ID.String() + "/replay"

	for path, want := range map[string]string{
		"/events?type=%ff":   "The query parameter type is not valid UTF-8.",
		"/events?type=a%00b": "The query parameter type must not contain NUL characters.",
		"/dead?cursor=%c3":   "The query parameter cursor is not valid UTF-8.",
		"/events/%ff":        "The address is not valid UTF-8.",
	} {
		p := br.get(path)
		require.Equal(t, http.StatusBadRequest, p.Status, path)
		requireContains(t, p, want)
	}
	for field, want := range map[string]string{
		"since": "The form field since is not valid UTF-8.",
		"from":  "The form field from is not valid UTF-8.",
	} {
		p := br.post(replay, url.Values{"csrf_token": {csrf}, field: {"\xff"}})
		require.Equal(t, http.StatusBadRequest, p.Status, field)
		requireContains(t, p, want)
	}
	p := br.post("/login", url.Values{"api_key": {"sk_\x00"}})
	require.Equal(t, http.StatusBadRequest, p.Status)
	requireContains(t, p, "The form field api_key must not contain NUL characters.")

	p = br.post(replay, url.Values{"csrf_token": {csrf}})
	require.Equal(t, http.StatusSeeOther, p.Status, "a clean form still works after the check parsed it")
}

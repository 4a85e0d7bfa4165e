package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDeadLettersShowLastError: each row of the dead-letter list says how
// its last attempt failed: the status, and the error or else the start of
// the response body, cut short with the whole text in its title.
func TestDeadLettersShowLastError(t *testing.T) {
	b := setup(t)
	s := b.seed(b.tenantA, "https://hooks.acme.test/a", false)
	long := "upstream said: " + strings.Repeat("no ", 60) + "END"
	b.kill(s.endpoint.ID, 503, "status 503", long)
	t2 := b.seed(b.tenantA, "https://hooks.acme.test/b", false)
	b.kill(t2.endpoint.ID, 0, "timeout after 10s", "")

	br := b.browser()
	br.login(b.keyA)
	p := br.get("/dead")
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, "<th>Last attempt</th>", "HTTP 503", `title="`+long+`"`, "upstream said: no no", "…</div>",
		"no response", "timeout after 10s")
	require.NotContains(t, p.Body, ">"+long+"<", "the row shows the start only")
	require.NotContains(t, p.Body, "status 503", "the code is not said twice")
}

// TestDeliveryPageSaysTheStatusOnce: an attempt answered 422 reads "HTTP
// 422", not also "status 422"; an error that adds something is shown.
func TestDeliveryPageSaysTheStatusOnce(t *testing.T) {
	b := setup(t)
	s := b.seed(b.tenantA, "https://hooks.acme.test/a", false)
	b.kill(s.endpoint.ID, 422, "status 422", `{"error":"bad"}`)
	br := b.browser()
	br.login(b.keyA)
	p := br.get("/deliveries/" + s.delivery.ID.String())
	require.Equal(t, http.StatusOK, p.Status)
	require.Equal(t, 1, strings.Count(p.Body, "422<"), "one HTTP 422 in the attempts list")
	require.NotContains(t, p.Body, "status 422")
}

// TestStatusBadgesInWords: badges say statuses in words, a disabled
// endpoint's with why (web's TestStatusWords has every reason), and keep
// the raw value in their class.
func TestStatusBadgesInWords(t *testing.T) {
	b := setup(t)
	s := b.seed(b.tenantA, "https://hooks.acme.test/a", true)
	off := b.seed(b.tenantA, "https://hooks.acme.test/off", false)
	set := off.endpoint.Settings()
	set.Disabled = true
	_, err := b.store.UpdateEndpoint(context.Background(), b.tenantA.ID, off.endpoint.ID, set, false)
	require.NoError(t, err)
	br := b.browser()
	br.login(b.keyA)

	p := br.get("/")
	requireContains(t, p, `<span class="badge badge-active" title="active">Active</span>`,
		`<span class="badge badge-disabled" title="disabled">Disabled — by hand</span>`,
		`<span class="badge badge-closed" title="closed">Closed</span>`)
	p = br.get("/endpoints/" + s.endpoint.ID.String())
	requireContains(t, p, `<span class="badge badge-dead" title="dead">Dead</span>`, `<option value="dead">Dead</option>`)
	requireContains(t, br.get("/dead"), `title="dead">Dead</span>`)
}

// TestFavicon: /favicon.ico answers the dashboard's icon, cached, without
// a session; the pages point at it.
func TestFavicon(t *testing.T) {
	b := setup(t)
	for _, path := range []string{"/favicon.ico", "/static/favicon.svg"} {
		res, err := http.Get(b.srv.URL + path)
		require.NoError(t, err)
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode, path)
		require.Contains(t, res.Header.Get("Content-Type"), "image/svg+xml", path)
		require.Equal(t, "public, max-age=3600", res.Header.Get("Cache-Control"), path)
		require.True(t, strings.HasPrefix(string(body), "<svg"), path)
	}
	requireContains(t, b.browser().get("/login"), `rel="icon" href="/static/favicon.svg"`)
}

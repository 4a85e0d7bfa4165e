package dashboard_test

import (
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// TestEventsFanOut: the events list says how many endpoints each event
// went to, a replay not counted again; a portal session counts only its
// consumer's endpoints.
func TestEventsFanOut(t *testing.T) {
	b := setup(t)
	w := b.portalWorld()
	fanOut := func(p page, ev sluice.Event) string {
		t.Helper()
		m := regexp.MustCompile(`(?s)href="/events/` + ev.ID.String() + `".*?<td class="num fan-out">([^<]*)</td>`).FindStringSubmatch(p.Body)
		require.NotNil(t, m, "no fan-out for event %s", ev.ID)
		return m[1]
	}

	br := b.browser()
	br.login(b.keyA)
	p := br.post("/deliveries/"+w.c1.delivery.ID.String()+"/replay", url.Values{"csrf_token": {br.csrf("/endpoints/new")}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = br.get("/events")
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, `<th class="num">Fan-out</th>`)
	require.Equal(t, "3 endpoints", fanOut(p, w.broadcast), "the broadcast reached c1's, c2's and the tenant's own")
	require.Equal(t, "1 endpoint", fanOut(p, w.c1.event), "its replay is not another endpoint")
	require.Equal(t, "1 endpoint", fanOut(p, w.own.event))

	portal := b.browser()
	portal.openPortal(w.link(t, b.tenantA.ID, "c1", time.Hour, false))
	p = portal.get("/events")
	require.Equal(t, http.StatusOK, p.Status)
	require.Equal(t, "1 endpoint", fanOut(p, w.broadcast), "c1 sees only its own endpoint")
	require.Equal(t, "1 endpoint", fanOut(p, w.c1.event))
	require.NotContains(t, p.Body, w.c2.event.ID.String())
}

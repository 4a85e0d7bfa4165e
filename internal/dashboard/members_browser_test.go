package dashboard_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/smtpsink"
)

// passwordLinkRe finds the link of an invitation or reset email.
var passwordLinkRe = regexp.MustCompile(`https?://\S+/password\?token=[A-Za-z0-9_-]+`)

// TestMembersBrowser: in Chromium, the owner (signed in with an API key)
// invites a viewer from the members page; the invitation arrives over
// SMTP; the viewer opens its link in a browser of its own, chooses a
// password and signs in with its email: it sees the endpoints and the
// deliveries, but no form and no secret, and a forged form, with a valid
// CSRF token of its own session, answers 403. The owner removes it, and
// its next request is signed out.
func TestMembersBrowser(t *testing.T) {
	sink := smtpsink.Start(t)
	s := startSluiceWith(t, map[string]string{"SLUICE_SMTP_URL": sink.URL(), "SLUICE_SMTP_FROM": "Sluice <sluice@acme.test>"})
	var ep sluice.Endpoint
	s.api("POST", "/v1/endpoints", map[string]any{"url": "https://hooks.acme.test/orders"}, http.StatusCreated, &ep)
	var del struct {
		Data []sluice.Delivery `json:"data"`
	}
	s.api("POST", "/v1/endpoints/"+ep.ID.String()+"/test", nil, http.StatusAccepted, nil)
	s.api("GET", "/v1/deliveries?endpoint_id="+ep.ID.String(), nil, http.StatusOK, &del)
	require.NotEmpty(t, del.Data, "the test event's delivery")

	owner := chromium(t, 120*time.Second)
	browserLogin(t, owner, s.srv.URL, s.key)
	require.NoError(t, chromedp.Do(owner,
		chromedp.Click(chromedp.CSS(`header nav a[href="/members"]`)),
		chromedp.WaitVisible(chromedp.ID("invite-member")),
		chromedp.SendKeys(chromedp.ID("email"), "vera@acme.test"),
		chromedp.SetValue(chromedp.ID("role"), "viewer"),
		chromedp.Click(chromedp.CSS(`#invite-member button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("p.flash")),
	))
	members := browserText(t, owner, "#members")
	require.Contains(t, members, "vera@acme.test")
	require.Contains(t, members, "Invited")

	mails := sink.Wait(t, 1, 30*time.Second)
	require.Equal(t, []string{"vera@acme.test"}, mails[0].To)
	require.Equal(t, "[Sluice] You are invited to Acme", mails[0].Subject)
	link := passwordLinkRe.FindString(mails[0].Text)
	require.True(t, strings.HasPrefix(link, s.srv.URL+"/password?token="), mails[0].Text)

	// The viewer, in a browser of its own.
	viewer := chromium(t, 120*time.Second)
	require.NoError(t, chromedp.Do(viewer,
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.ID("password-form")),
	))
	require.Equal(t, "vera@acme.test", browserText(t, viewer, "#member-email"))
	require.NoError(t, chromedp.Do(viewer,
		chromedp.SendKeys(chromedp.ID("password"), "correct horse battery"),
		chromedp.SendKeys(chromedp.ID("confirm"), "correct horse battery"),
		chromedp.Click(chromedp.CSS(`#password-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("member-login")),
	))
	require.Contains(t, browserText(t, viewer, "p.flash"), "Your password is set")
	require.NoError(t, chromedp.Do(viewer,
		chromedp.SendKeys(chromedp.ID("email"), "Vera@acme.test"),
		chromedp.SendKeys(chromedp.ID("password"), "correct horse battery"),
		chromedp.Click(chromedp.CSS(`#member-login button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("endpoints")),
	))
	require.Contains(t, browserText(t, viewer, "#who"), "vera@acme.test")
	require.Equal(t, "viewer", browserText(t, viewer, "#role"))
	require.Contains(t, browserText(t, viewer, "#endpoints"), ep.URL)
	noForms := func(page string) {
		t.Helper()
		n, err := chromedp.Run(viewer, chromedp.Evaluate[int](`document.querySelectorAll("main form").length`))
		require.NoError(t, err)
		require.Zero(t, n, "%s shows a viewer no form", page)
		body := browserText(t, viewer, "body")
		require.NotContains(t, body, "whsec_", page)
	}
	noForms("the endpoints")
	require.NoError(t, chromedp.Do(viewer,
		chromedp.Click(chromedp.CSS(`#endpoints a[href="/endpoints/`+ep.ID.String()+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`table.deliveries a[href="/deliveries/`+del.Data[0].ID.String()+`"]`)),
	))
	noForms("the endpoint")
	screenshot(t, viewer, "viewer-endpoint")
	require.NoError(t, chromedp.Do(viewer,
		chromedp.Navigate(s.srv.URL+"/deliveries/"+del.Data[0].ID.String()),
		chromedp.WaitVisible(chromedp.ID("delivery")),
	))
	noForms("the delivery")
	nav := browserText(t, viewer, "header nav")
	require.NotContains(t, nav, "Members")
	require.NotContains(t, nav, "Audit log")

	// A form the page does not show, forged with the session's own CSRF
	// token (from the sign-out form), is refused.
	forge := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`(() => {
			const f = document.createElement("form");
			f.method = "post";
			f.action = "/endpoints/`+ep.ID.String()+`/secret";
			const token = document.createElement("input");
			token.type = "hidden";
			token.name = "csrf_token";
			token.value = document.querySelector("form.logout input[name=csrf_token]").value;
			f.appendChild(token);
			document.body.appendChild(f);
			f.submit();
			return true;
		})()`)(ctx, tg)
		return err
	})
	res, err := chromedp.RunResponse(viewer, forge)
	require.NoError(t, err)
	require.EqualValues(t, http.StatusForbidden, res.Status)
	require.Contains(t, browserText(t, viewer, "main"), "Your role (viewer) may not do this")
	require.NotContains(t, browserText(t, viewer, "body"), "whsec_")

	// The owner removes the viewer, behind a confirmation.
	page, err := s.proc.Store.ListMembers(context.Background(), s.tenant.ID, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	vera := page.Items[0]
	require.Equal(t, "active", vera.Status)
	require.NoError(t, chromedp.Do(owner,
		chromedp.Navigate(s.srv.URL+"/members"),
		chromedp.Click(chromedp.CSS(`#member-`+vera.ID.String()+` a.remove`)),
		chromedp.WaitVisible(chromedp.CSS("form.confirm")),
		chromedp.Click(chromedp.CSS(`form.confirm button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("p.flash")),
	))
	require.Contains(t, browserText(t, owner, "p.flash"), "Member removed")
	require.NotContains(t, browserText(t, owner, "main"), "vera@acme.test")

	// The viewer's next request finds itself signed out.
	require.NoError(t, chromedp.Do(viewer,
		chromedp.Navigate(s.srv.URL+"/endpoints/"+ep.ID.String()),
		chromedp.WaitVisible(chromedp.ID("api_key")),
	))
	loc, err := chromedp.Run(viewer, chromedp.Location())
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(strings.TrimPrefix(loc, s.srv.URL), "/login"), loc)
}

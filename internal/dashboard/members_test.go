package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/dashboard"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/jobs/jobstest"
	"github.com/sluice-dev/sluice/internal/member"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
	"github.com/sluice-dev/sluice/internal/testkit/dispatchtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// invite adds a member of tenant with role and returns it with the token
// of a link to set its password, made as the mail job makes one, working
// from now for member.TokenTTL.
func (b *bundle) invite(tenant sluice.Tenant, email string, role sluice.Role, now time.Time) (sluice.Member, string) {
	t := b.t
	t.Helper()
	ctl := control.New(control.Config{Store: b.store, Nudger: b.jobs})
	who := control.Caller{Tenant: tenant.ID, Actor: sluice.Actor{Type: sluice.ActorAPIKey, ID: "test", Name: "test"}, Role: sluice.RoleOwner}
	m, err := ctl.InviteMember(context.Background(), who, control.MemberInput{Email: email, Role: role})
	require.NoError(t, err)
	token := member.NewToken()
	require.NoError(t, store.Exec(context.Background(), b.store, (*dbq.Queries).InsertMemberToken, dbq.InsertMemberTokenParams{
		TokenHash: member.TokenHash(token), MemberID: m.ID, Purpose: member.PurposeInvite, ExpiresAt: now.Add(member.TokenTTL),
	}))
	return m, token
}

// member adds a member of tenant A who has set password.
func (b *bundle) member(email string, role sluice.Role, password string) sluice.Member {
	t := b.t
	t.Helper()
	m, token := b.invite(b.tenantA, email, role, time.Now())
	_, err := b.store.SetMemberPassword(context.Background(), member.TokenHash(token), member.HashPassword(password), time.Now())
	require.NoError(t, err)
	return m
}

// loginMember signs in with an email and password and requires it to work.
func (br *browser) loginMember(email, password string) {
	t := br.b.t
	t.Helper()
	p := br.post("/login", url.Values{"email": {email}, "password": {password}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/", p.Location())
}

const goodPassword = "a long enough secret"

// TestPasswordLinks: an invitation's link shows its member and sets the
// password once, within 24 hours of the dashboard's clock; a used, expired,
// unknown or malformed link is refused; the password must be long enough
// and typed twice alike. Setting it makes the member active.
func TestPasswordLinks(t *testing.T) {
	b := setup(t)
	now := time.Now()
	m, token := b.invite(b.tenantA, "ann@acme.test", sluice.RoleViewer, now)
	br := b.browser()

	p := br.get("/password?token=" + token)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireContains(t, p, "ann@acme.test", "Welcome", `name="token"`)

	set := func(token, password, confirm string) page {
		t.Helper()
		return br.post("/password", url.Values{"token": {token}, "password": {password}, "confirm": {confirm}})
	}
	p = set(token, "too short", "too short")
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, "at least 12 characters")
	p = set(token, goodPassword, goodPassword+"!")
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, "The two passwords differ.")

	p = set(token, goodPassword, goodPassword)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/login?password_set=1", p.Location())
	got, err := b.store.GetMember(context.Background(), b.tenantA.ID, m.ID)
	require.NoError(t, err)
	require.Equal(t, sluice.MemberActive, got.Status)

	// Used once, the link is spent.
	require.Equal(t, http.StatusForbidden, br.get("/password?token="+token).Status)
	p = set(token, "another long password", "another long password")
	require.Equal(t, http.StatusForbidden, p.Status)
	requireContains(t, p, "Link not valid")
	br.loginMember("ann@acme.test", goodPassword)

	// A link past its 24 hours is refused, by the dashboard's clock.
	bob, late := b.invite(b.tenantA, "bob@acme.test", sluice.RoleAdmin, now)
	b.setClock(now.Add(member.TokenTTL + time.Minute))
	other := b.browser()
	require.Equal(t, http.StatusForbidden, other.get("/password?token="+late).Status)
	p = other.post("/password", url.Values{"token": {late}, "password": {goodPassword}, "confirm": {goodPassword}})
	require.Equal(t, http.StatusForbidden, p.Status)
	got, err = b.store.GetMember(context.Background(), b.tenantA.ID, bob.ID)
	require.NoError(t, err)
	require.Equal(t, sluice.MemberInvited, got.Status, "no password set")

	// Unknown and malformed tokens.
	require.Equal(t, http.StatusForbidden, other.get("/password?token="+member.NewToken()).Status)
	require.Equal(t, http.StatusForbidden, other.get("/password?token=nonsense").Status)
	require.Equal(t, http.StatusForbidden, other.get("/password").Status)
}

// TestMemberSignIn: a member signs in with its email in any case and its
// password; a wrong password, an unknown email and an invited member who
// has no password yet are refused alike; the session acts as the member,
// whose role applies from the next request, and removing the member ends
// its session.
func TestMemberSignIn(t *testing.T) {
	b := setup(t)
	ann := b.member("ann@acme.test", sluice.RoleAdmin, goodPassword)
	b.invite(b.tenantA, "new@acme.test", sluice.RoleAdmin, time.Now())

	br := b.browser()
	for _, tc := range []url.Values{
		{"email": {"ann@acme.test"}, "password": {"wrong password!"}},
		{"email": {"nobody@acme.test"}, "password": {goodPassword}},
		{"email": {"new@acme.test"}, "password": {""}},
	} {
		p := br.post("/login", tc)
		require.Equal(t, http.StatusUnauthorized, p.Status, tc.Encode())
		requireContains(t, p, "That email and password do not match.")
	}
	br.loginMember("ANN@Acme.test", goodPassword)
	home := br.get("/")
	requireContains(t, home, "Acme · ann@acme.test", `id="role">admin<`, `href="/audit"`, "New endpoint")
	require.NotContains(t, home.Body, `href="/members"`, "an admin does not manage members")

	// What it changes is recorded as the member's.
	token := br.csrf("/consumers")
	p := br.post("/consumers", url.Values{"csrf_token": {token}, "uid": {"c1"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	log, err := b.store.AuditLog(context.Background(), b.tenantA.ID, sluice.AuditFilter{}, sluice.PageParams{Limit: 1})
	require.NoError(t, err)
	require.Equal(t, sluice.Actor{Type: sluice.ActorMember, ID: ann.ID.String(), Name: "ann@acme.test"}, log.Items[0].Actor)

	// Made a viewer, it reads the same pages without forms, from its next
	// request on.
	_, err = b.store.SetMemberRole(context.Background(), b.tenantA.ID, ann.ID, sluice.RoleViewer)
	require.NoError(t, err)
	home = br.get("/")
	requireContains(t, home, `id="role">viewer<`, `form class="logout"`)
	require.NotContains(t, home.Body, "New endpoint")
	p = br.post("/consumers", url.Values{"csrf_token": {token}, "uid": {"c2"}})
	require.Equal(t, http.StatusForbidden, p.Status)
	requireContains(t, p, "Your role (viewer) may not do this")

	// Removed, it is signed out at once.
	require.NoError(t, store.ExecRows(context.Background(), b.store, (*dbq.Queries).DeleteMember, dbq.DeleteMemberParams{TenantID: b.tenantA.ID, ID: ann.ID}))
	p = br.get("/")
	require.Equal(t, http.StatusSeeOther, p.Status)
	require.Equal(t, "/login", p.Location())
}

// TestRolesInTheDashboard: what each role may reach, by the one rule
// (sluice.Role.Allows): an admin everything but members, a viewer only
// pages without forms, no audit log and no secret; an API key's session
// everything.
func TestRolesInTheDashboard(t *testing.T) {
	b := setup(t)
	s := b.seed(b.tenantA, "https://hooks.acme.test/a", true)
	b.member("admin@acme.test", sluice.RoleAdmin, goodPassword)
	b.member("viewer@acme.test", sluice.RoleViewer, goodPassword)
	target := b.member("target@acme.test", sluice.RoleViewer, goodPassword)
	ep := "/endpoints/" + s.endpoint.ID.String()
	mp := "/members/" + target.ID.String()

	owner := b.browser()
	owner.login(b.keyA)
	admin := b.browser()
	admin.loginMember("admin@acme.test", goodPassword)
	viewer := b.browser()
	viewer.loginMember("viewer@acme.test", goodPassword)
	tokens := map[*browser]string{owner: owner.csrf("/"), admin: admin.csrf("/"), viewer: viewer.csrf("/")}

	gets := []struct {
		path          string
		owner, admin  int
		viewer        int
		viewerRefusal string
	}{
		{"/", 200, 200, 200, ""},
		{ep, 200, 200, 200, ""},
		{"/dead", 200, 200, 200, ""},
		{"/deliveries/" + s.delivery.ID.String(), 200, 200, 200, ""},
		{"/consumers", 200, 200, 200, ""},
		{"/api-keys", 200, 200, 200, ""},
		{"/event-types", 200, 200, 200, ""},
		{"/settings", 200, 200, 200, ""},
		{"/audit", 200, 200, 403, "viewer"},
		{"/members", 200, 403, 403, "viewer"},
		{mp + "/remove", 200, 403, 403, "viewer"},
		{"/endpoints/new", 200, 200, 403, "viewer"},
		{ep + "/edit", 200, 200, 403, "viewer"},
		{ep + "/delete", 200, 200, 403, "viewer"},
		{"/consumers/x/edit", 404, 404, 403, "viewer"},
	}
	for _, g := range gets {
		for br, want := range map[*browser]int{owner: g.owner, admin: g.admin, viewer: g.viewer} {
			p := br.get(g.path)
			require.Equal(t, want, p.Status, "GET %s", g.path)
		}
	}
	for _, path := range []string{"/", ep, "/consumers", "/api-keys", "/event-types", "/dead", "/settings"} {
		p := viewer.get(path)
		require.NotContains(t, p.Body, `method="post"`+" action=\"/endpoints", path)
		require.Equal(t, 1, strings.Count(p.Body, "<form"), "%s: only the sign-out form", path)
	}

	posts := []struct {
		path  string
		form  url.Values
		admin int // an owner's answer is the admin's
	}{
		{ep + "/secret", nil, 200},
		{ep + "/test", nil, 303},
		{"/members", url.Values{"email": {"x@acme.test"}, "role": {"viewer"}}, 403},
		{mp + "/edit", url.Values{"role": {"admin"}}, 403},
		{"/settings", url.Values{"retention": {"24h"}}, 303},
	}
	for _, ps := range posts {
		for br, want := range map[*browser]int{admin: ps.admin, viewer: 403} {
			f := url.Values{"csrf_token": {tokens[br]}}
			for k, v := range ps.form {
				f[k] = v
			}
			p := br.post(ps.path, f)
			require.Equal(t, want, p.Status, "POST %s: %s", ps.path, p.Body)
			if want == http.StatusForbidden {
				require.NotContains(t, p.Body, "whsec_")
			}
		}
	}
	f := url.Values{"csrf_token": {tokens[owner]}, "email": {"x@acme.test"}, "role": {"viewer"}}
	require.Equal(t, http.StatusOK, owner.post("/members", f).Status)
	f = url.Values{"csrf_token": {tokens[owner]}, "confirm": {"yes"}}
	p := owner.post(mp+"/remove", f)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/members?done=removed", p.Location())
}

// TestForgotPassword: asking for a reset link answers the same whether or
// not a member has the email, and queues a mail job either way, one naming
// no member (which mails no one) for an unknown email, so the two take the
// same work.
func TestForgotPassword(t *testing.T) {
	b := setup(t)
	ann := b.member("ann@acme.test", sluice.RoleViewer, goodPassword)
	br := b.browser()
	require.Equal(t, http.StatusOK, br.get("/forgot").Status)
	known := br.post("/forgot", url.Values{"email": {"Ann@acme.test"}})
	unknown := br.post("/forgot", url.Values{"email": {"nobody@acme.test"}})
	require.Equal(t, http.StatusOK, known.Status)
	require.Equal(t, known.Status, unknown.Status)
	require.Equal(t, known.Body, unknown.Body)
	requireContains(t, known, "If a member has this email")

	var queued []string
	for _, a := range jobstest.ArgsOf[jobs.MemberMailArgs](t, b.store.Pool()) {
		who := "ann"
		if a.MemberID != ann.ID {
			require.Equal(t, uuid.Nil, a.MemberID)
			who = "no one"
		}
		queued = append(queued, a.Purpose+" "+who)
	}
	require.ElementsMatch(t, []string{member.PurposeInvite + " ann", member.PurposeReset + " ann", member.PurposeReset + " no one"}, queued,
		"the invitation, the reset, and the unknown email's job that mails no one")
}

// TestMemberSignInLimitedPerAddress: wrong passwords count against the
// client's address as wrong keys do: the 11th try in a minute is 429, even
// with the right password.
func TestMemberSignInLimitedPerAddress(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	// The limits' clock stands still: ten password hashes under -race on a
	// busy machine can take longer than the bucket takes to refill a try.
	at := time.Now()
	limits := apirate.New(apirate.Config{Rates: f.Store, Now: func() time.Time { return at }})
	h := dashboard.New(controltest.New(f.Store, controltest.Options{PortalKey: dashboardKey, Nudger: dispatchtest.Nudger(f.Store, f.Jobs)}), dashboard.Config{Key: dashboardKey, Limits: limits}).Handler()
	m, err := f.Store.AddMember(context.Background(), f.TenantA.ID, "ann@acme.test", sluice.RoleOwner)
	require.NoError(t, err)
	token := member.NewToken()
	require.NoError(t, store.Exec(context.Background(), f.Store, (*dbq.Queries).InsertMemberToken, dbq.InsertMemberTokenParams{
		TokenHash: member.TokenHash(token), MemberID: m.ID, Purpose: member.PurposeInvite, ExpiresAt: time.Now().Add(time.Hour),
	}))
	_, err = f.Store.SetMemberPassword(context.Background(), member.TokenHash(token), member.HashPassword(goodPassword), time.Now())
	require.NoError(t, err)
	signIn := func(addr, password string) *httptest.ResponseRecorder {
		form := url.Values{"email": {"ann@acme.test"}, "password": {password}}
		req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = addr
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	for i := range 10 {
		require.Equal(t, http.StatusUnauthorized, signIn("198.51.100.7:4000", "wrong password!").Code, "try %d", i)
	}
	w := signIn("198.51.100.7:4001", goodPassword)
	require.Equal(t, http.StatusTooManyRequests, w.Code, "the 11th try in a minute, even with the right password")
	require.Contains(t, w.Body.String(), "Too many failed sign-in attempts")
	require.Equal(t, http.StatusSeeOther, signIn("198.51.100.8:4000", goodPassword).Code, "another address")
}

// TestBadPasswordLinksDoNotLockOutAValidOne: an address that opened a
// thousand bad password links is over its limit of failures, yet a valid
// link opened from it is served and sets the password: only failures are
// limited. The bad links looked up past the limit are bounded by the
// address's look-ups (ten a second, bursts of twenty).
func TestBadPasswordLinksDoNotLockOutAValidOne(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	at := time.Now() // the limits' clock stands still unless moved
	limits := apirate.New(apirate.Config{Rates: f.Store, Now: func() time.Time { return at }})
	h := dashboard.New(controltest.New(f.Store, controltest.Options{PortalKey: dashboardKey, Nudger: dispatchtest.Nudger(f.Store, f.Jobs)}),
		dashboard.Config{Key: dashboardKey, Limits: limits}).Handler()
	m, err := f.Store.AddMember(context.Background(), f.TenantA.ID, "ann@acme.test", sluice.RoleOwner)
	require.NoError(t, err)
	token := member.NewToken()
	require.NoError(t, store.Exec(context.Background(), f.Store, (*dbq.Queries).InsertMemberToken, dbq.InsertMemberTokenParams{
		MemberID: m.ID, TokenHash: member.TokenHash(token), Purpose: member.PurposeInvite, ExpiresAt: time.Now().Add(time.Hour)}))
	const addr = "198.51.100.7:4000"
	serve := func(req *http.Request) *httptest.ResponseRecorder {
		req.RemoteAddr = addr
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	open := func(token string) *httptest.ResponseRecorder {
		return serve(httptest.NewRequest(http.MethodGet, "/password?token="+url.QueryEscape(token), nil))
	}

	statuses := map[int]int{}
	for i := range 1000 {
		bad := member.NewToken()
		if i%2 == 1 {
			bad = "nonsense"
		}
		statuses[open(bad).Code]++
	}
	require.Equal(t, map[int]int{http.StatusForbidden: 10, http.StatusTooManyRequests: 990}, statuses, "ten failures, then 429")

	// A tenth of a second later the address may have one more link looked
	// up: the valid one is served.
	at = at.Add(100 * time.Millisecond)
	w := open(token)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), "ann@acme.test")
	require.Equal(t, http.StatusTooManyRequests, open(member.NewToken()).Code, "bad links still answer 429")
	require.Equal(t, http.StatusOK, open(token).Code, "a link found valid is looked up past the limit")

	form := url.Values{"token": {token}, "password": {goodPassword}, "confirm": {goodPassword}}
	req := httptest.NewRequest(http.MethodPost, "/password", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w = serve(req)
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	got, err := f.Store.GetMember(context.Background(), f.TenantA.ID, m.ID)
	require.NoError(t, err)
	require.Equal(t, sluice.MemberActive, got.Status)
}

// setupMemberMail is setup with members' links sent as mm says.
func setupMemberMail(t *testing.T, mm control.MemberMail) *bundle {
	t.Helper()
	return setupWith(t, func(b *bundle) http.Handler {
		ctl := controltest.New(b.store, controltest.Options{PortalKey: dashboardKey, Nudger: b.nudger, Now: b.now, MemberMail: mm})
		return dashboard.New(ctl, dashboard.Config{Key: dashboardKey, Now: b.now, Limits: looseLimits(b.store)}).Handler()
	})
}

// TestInviteAndResetWithoutMail: without SLUICE_SMTP_URL the invite form
// and the reset form answer 409 saying that email is not configured, and
// invite no one; the form keeps what was typed.
func TestInviteAndResetWithoutMail(t *testing.T) {
	b := setupMemberMail(t, control.MemberMailNone)
	owner := b.browser()
	owner.login(b.keyA)
	p := owner.post("/members", url.Values{"csrf_token": {owner.csrf("/members")}, "email": {"ann@acme.test"}, "role": {"admin"}})
	require.Equal(t, http.StatusConflict, p.Status, p.Body)
	requireContains(t, p, "Email is not configured on this server", "SLUICE_SMTP_URL", `value="ann@acme.test"`)
	require.NotContains(t, p.Body, "exists already")
	require.NotContains(t, p.Body, "Invitation sent")
	require.NotContains(t, p.Body, `aria-label="Role of ann@acme.test"`, "no one invited")

	p = b.browser().post("/forgot", url.Values{"email": {"ann@acme.test"}})
	require.Equal(t, http.StatusConflict, p.Status, p.Body)
	requireContains(t, p, "Email is not configured on this server", "SLUICE_SMTP_URL")
	require.NotContains(t, p.Body, "on its way")
	require.Empty(t, jobstest.ArgsOf[jobs.MemberMailArgs](t, b.store.Pool()))
}

// TestInviteAndResetLogged: in development mode (SLUICE_DEV_MAIL_LOG,
// `make run`) the invitation and the reset go through, and the pages say
// that the link is in the server's log, not in a mailbox.
func TestInviteAndResetLogged(t *testing.T) {
	b := setupMemberMail(t, control.MemberMailLog)
	owner := b.browser()
	owner.login(b.keyA)
	p := owner.post("/members", url.Values{"csrf_token": {owner.csrf("/members")}, "email": {"ann@acme.test"}, "role": {"admin"}})
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireContains(t, p, "not emailed", "in the server&#39;s log", `aria-label="Role of ann@acme.test"`)
	require.NotContains(t, p.Body, "Invitation sent")

	p = b.browser().post("/forgot", url.Values{"email": {"ann@acme.test"}})
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireContains(t, p, "written to the server&#39;s log")
	require.NotContains(t, p.Body, "on its way")
	require.Len(t, jobstest.ArgsOf[jobs.MemberMailArgs](t, b.store.Pool()), 2, "the invitation and the reset, whose links the worker logs")
}

package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/jobs/jobstest"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
)

// TestMembers: invite, list, read, change and remove a member through the
// API, with their 201/200/204 answers, 404 for another tenant's or an
// unknown member, 409 for an email any tenant's member has (in any case)
// and 422 naming the fields at fault.
func TestMembers(t *testing.T) {
	b := setup(t)

	r := b.do(b.keyA, http.MethodPost, "/v1/members", map[string]any{"email": "Ann@Acme.test", "role": "viewer"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	ann := r.JSON(t)
	require.Equal(t, "Ann@Acme.test", ann["email"])
	require.Equal(t, "viewer", ann["role"])
	require.Equal(t, "invited", ann["status"])
	annID := ann["id"].(string)

	// The invitation's email is a job, queued with the member.
	mails := jobstest.ArgsOf[jobs.MemberMailArgs](t, b.store.Pool())
	require.Len(t, mails, 1)
	job := mails[0]
	require.Equal(t, annID, job.MemberID.String())
	require.Equal(t, "invite", job.Purpose)

	for name, tc := range map[string]struct {
		key  string
		body any
	}{
		"same case":            {b.keyA, map[string]any{"email": "Ann@Acme.test", "role": "admin"}},
		"other case":           {b.keyA, map[string]any{"email": "ann@acme.TEST", "role": "admin"}},
		"another tenant's too": {b.keyB, map[string]any{"email": "ANN@acme.test", "role": "owner"}},
	} {
		r := b.do(tc.key, http.MethodPost, "/v1/members", tc.body)
		requireProblem(t, r, http.StatusConflict)
		require.Contains(t, string(r.Body), "already exists", name)
	}

	for name, tc := range map[string]struct {
		body   any
		fields []string
	}{
		"empty":          {map[string]any{}, []string{"email", "role"}},
		"not an address": {map[string]any{"email": "ann", "role": "viewer"}, []string{"email"}},
		"display name":   {map[string]any{"email": "Ann <ann@x.test>", "role": "viewer"}, []string{"email"}},
		"unknown role":   {map[string]any{"email": "bob@acme.test", "role": "root"}, []string{"role"}},
		"wrong type":     {map[string]any{"email": 7, "role": "viewer"}, []string{"email"}},
	} {
		r := b.do(b.keyA, http.MethodPost, "/v1/members", tc.body)
		p := requireProblem(t, r, http.StatusUnprocessableEntity)
		var fields []string
		for _, e := range p["errors"].([]any) {
			fields = append(fields, e.(map[string]any)["field"].(string))
		}
		require.ElementsMatch(t, tc.fields, fields, name)
	}

	r = b.do(b.keyA, http.MethodPost, "/v1/members", map[string]any{"email": "bob@acme.test", "role": "admin"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	bobID := r.JSON(t)["id"].(string)

	// Newest first, a page at a time.
	r = b.do(b.keyA, http.MethodGet, "/v1/members?limit=1", nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	page := r.JSON(t)
	require.Len(t, page["data"], 1)
	require.Equal(t, bobID, page["data"].([]any)[0].(map[string]any)["id"])
	r = b.do(b.keyA, http.MethodGet, "/v1/members?limit=1&cursor="+page["next_cursor"].(string), nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	page = r.JSON(t)
	require.Equal(t, annID, page["data"].([]any)[0].(map[string]any)["id"])
	require.Nil(t, page["next_cursor"])
	r = b.do(b.keyB, http.MethodGet, "/v1/members", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.Empty(t, r.JSON(t)["data"], "tenant B has none")

	r = b.do(b.keyA, http.MethodGet, "/v1/members/"+annID, nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Equal(t, "Ann@Acme.test", r.JSON(t)["email"])
	requireProblem(t, b.do(b.keyB, http.MethodGet, "/v1/members/"+annID, nil), http.StatusNotFound)
	requireProblem(t, b.do(b.keyA, http.MethodGet, "/v1/members/"+uuid.NewString(), nil), http.StatusNotFound)
	requireProblem(t, b.do(b.keyA, http.MethodGet, "/v1/members/nope", nil), http.StatusNotFound)

	r = b.do(b.keyA, http.MethodPatch, "/v1/members/"+annID, map[string]any{"role": "admin"})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Equal(t, "admin", r.JSON(t)["role"])
	requireProblem(t, b.do(b.keyA, http.MethodPatch, "/v1/members/"+annID, map[string]any{"role": "god"}), http.StatusUnprocessableEntity)
	requireProblem(t, b.do(b.keyA, http.MethodPatch, "/v1/members/"+annID, map[string]any{}), http.StatusUnprocessableEntity)
	requireProblem(t, b.do(b.keyA, http.MethodPatch, "/v1/members/"+annID, map[string]any{"email": "x@y.test"}), http.StatusUnprocessableEntity)
	requireProblem(t, b.do(b.keyB, http.MethodPatch, "/v1/members/"+annID, map[string]any{"role": "owner"}), http.StatusNotFound)

	requireProblem(t, b.do(b.keyB, http.MethodDelete, "/v1/members/"+annID, nil), http.StatusNotFound)
	r = b.do(b.keyA, http.MethodDelete, "/v1/members/"+annID, nil)
	require.Equal(t, http.StatusNoContent, r.Status, string(r.Body))
	requireProblem(t, b.do(b.keyA, http.MethodDelete, "/v1/members/"+annID, nil), http.StatusNotFound)
	requireProblem(t, b.do(b.keyA, http.MethodGet, "/v1/members/"+annID, nil), http.StatusNotFound)

	// Its email is free again.
	r = b.do(b.keyB, http.MethodPost, "/v1/members", map[string]any{"email": "ann@acme.test", "role": "owner"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
}

// withMemberMail is b's tenants and store behind an API whose control
// sends members' links as mm says.
func (b *testBundle) withMemberMail(mm control.MemberMail) *testBundle {
	c := *b
	ctl := controltest.New(b.store, controltest.Options{AllowPrivateTargets: true, Nudger: b.nudger, MemberMail: mm})
	api := httpapi.New(ctl, httpapi.Config{Ingest: httpapi.StartIngest(b.t, b.store, b.nudger),
		Limits: apirate.New(apirate.Config{Tenant: testRate, Rates: b.store})})
	c.handler = api.Handler()
	c.srv = httptest.NewServer(c.handler)
	b.t.Cleanup(c.srv.Close)
	return &c
}

// TestInviteWithoutMail: a server without SLUICE_SMTP_URL answers an
// invitation with 409 problem+json saying that email is not configured,
// and invites no one; in development mode (SLUICE_DEV_MAIL_LOG) it
// invites, with Sluice-Mail: logged saying where the link went. An
// emailed invitation has no such header.
func TestInviteWithoutMail(t *testing.T) {
	b := setup(t)
	none := b.withMemberMail(control.MemberMailNone)
	r := none.do(b.keyA, http.MethodPost, "/v1/members", map[string]any{"email": "ann@acme.test", "role": "viewer"})
	requireProblem(t, r, http.StatusConflict)
	require.Contains(t, r.JSON(t)["detail"], "email is not configured")
	require.Contains(t, r.JSON(t)["detail"], "SLUICE_SMTP_URL")
	require.Empty(t, none.do(b.keyA, http.MethodGet, "/v1/members", nil).JSON(t)["data"], "no one invited")
	require.Empty(t, jobstest.ArgsOf[jobs.MemberMailArgs](t, b.store.Pool()))

	logged := b.withMemberMail(control.MemberMailLog)
	r = logged.do(b.keyA, http.MethodPost, "/v1/members", map[string]any{"email": "ann@acme.test", "role": "viewer"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	require.Equal(t, "logged", r.Header.Get("Sluice-Mail"))
	require.Len(t, jobstest.ArgsOf[jobs.MemberMailArgs](t, b.store.Pool()), 1, "the job that logs the link")

	r = b.do(b.keyA, http.MethodPost, "/v1/members", map[string]any{"email": "bob@acme.test", "role": "viewer"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	require.Empty(t, r.Header.Get("Sluice-Mail"), "emailed")
}

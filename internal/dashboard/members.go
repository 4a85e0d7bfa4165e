package dashboard

import (
	"errors"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/audit"
	"github.com/sluice-dev/sluice/internal/member"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// Members, an owner's pages (authorized holds the rest to member.Role's
// rule): the list with a role form per member and the form that invites
// one, and removal behind a confirmation page. The rules are the API's
// (package member).

// memberFlashes are the outcomes of member actions (?done=).
var memberFlashes = map[string]string{
	"invited": "Invitation sent: the member chooses a password from the emailed link.",
	"updated": "Role changed. It applies from the member's next request.",
	"removed": "Member removed, and signed out.",
}

// listMembers is GET /members.
func (d *Dashboard) listMembers(w http.ResponseWriter, r *http.Request) error {
	return d.renderMembers(w, r, http.StatusOK, web.MembersView{Flash: memberFlashes[r.URL.Query().Get("done")], Role: member.Viewer})
}

func (d *Dashboard) renderMembers(w http.ResponseWriter, r *http.Request, status int, v web.MembersView) error {
	p, err := pageParams(r)
	if err != nil {
		return err
	}
	page, err := d.store.ListMembers(r.Context(), tenantID(r), p)
	if err != nil {
		return err
	}
	v.Members, v.Older = page.Items, olderURL(r, page.Next)
	if s, _ := sessionFromContext(r.Context()); s.member != nil {
		v.Current = s.member.ID
	}
	return d.render(w, r, status, web.MembersPage(chrome(r, web.SectionMembers), v))
}

// inviteMember is POST /members: invites a member, whose invitation is
// emailed by a job queued with it.
func (d *Dashboard) inviteMember(w http.ResponseWriter, r *http.Request) error {
	p := member.NewParams{Email: member.NormalizeEmail(r.PostForm.Get("email")), Role: member.Role(r.PostForm.Get("role"))}
	refill := web.MembersView{Email: p.Email, Role: p.Role}
	if err := p.Validate(); err != nil {
		refill.Error = fieldErrors(err)
		return d.renderMembers(w, r, http.StatusUnprocessableEntity, refill)
	}
	m, err := d.store.InviteMember(r.Context(), tenantID(r), p, d.jobs)
	if errors.Is(err, sluice.ErrConflict) {
		refill.Error = "A member with this email exists already, in this account or another."
		return d.renderMembers(w, r, http.StatusConflict, refill)
	}
	if err != nil {
		return err
	}
	audit.Object(r.Context(), m.ID.String())
	// Shown in the answer, not after a redirect to /members: a redirect
	// to the form's own path would be taken for a confirmation to make
	// first (audit.Middleware), and the invitation rolled back.
	return d.renderMembers(w, r, http.StatusOK, web.MembersView{Flash: memberFlashes["invited"], Role: member.Viewer})
}

// pathMember is the member the path names.
func (d *Dashboard) pathMember(r *http.Request) (member.Member, error) {
	id, err := pathID(r)
	if err != nil {
		return member.Member{}, err
	}
	return d.store.GetMember(r.Context(), tenantID(r), id)
}

// updateMember is POST /members/{id}/edit: changes a member's role, from
// its next request on.
func (d *Dashboard) updateMember(w http.ResponseWriter, r *http.Request) error {
	m, err := d.pathMember(r)
	if err != nil {
		return err
	}
	role := member.Role(strings.TrimSpace(r.PostForm.Get("role")))
	if !role.Valid() {
		return errBadRequest("Choose a role from the list.")
	}
	if _, err := d.store.SetMemberRole(r.Context(), tenantID(r), m.ID, role); err != nil {
		return err
	}
	return redirect(w, r, "/members?done=updated")
}

// confirmRemoveMember is GET /members/{id}/remove: what removing the
// member does, and the form that does it.
func (d *Dashboard) confirmRemoveMember(w http.ResponseWriter, r *http.Request) error {
	m, err := d.pathMember(r)
	if err != nil {
		return err
	}
	v := web.RemoveMemberView{Member: m, Current: d.isSessionMember(r, m.ID)}
	return d.render(w, r, http.StatusOK, web.RemoveMemberPage(chrome(r, web.SectionMembers), v))
}

// removeMember is POST /members/{id}/remove, the confirmed removal: the
// member's sessions end with it, the remover's own if it removed itself.
func (d *Dashboard) removeMember(w http.ResponseWriter, r *http.Request) error {
	m, err := d.pathMember(r)
	if err != nil {
		return err
	}
	if r.PostForm.Get("confirm") != "yes" {
		return redirect(w, r, r.URL.Path)
	}
	if err := d.store.RemoveMember(r.Context(), tenantID(r), m.ID); err != nil {
		return err
	}
	if d.isSessionMember(r, m.ID) {
		d.clearSessionCookie(w, r)
		return redirect(w, r, "/login")
	}
	return redirect(w, r, "/members?done=removed")
}

// isSessionMember reports whether the request's session is member id's.
func (d *Dashboard) isSessionMember(r *http.Request, id uuid.UUID) bool {
	s, _ := sessionFromContext(r.Context())
	return s.member != nil && s.member.ID == id
}

package dashboard

import (
	"errors"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// Members, an owner's pages (authorized holds the rest to sluice.Role's
// rule): the list with a role form per member and the form that invites
// one, and removal behind a confirmation page. The rules are the API's
// (control).

// memberFlashes are the outcomes of member actions (?done=).
var memberFlashes = map[string]string{
	"invited": "Invitation sent: the member chooses a password from the emailed link.",
	"invited-logged": "Member invited, but not emailed: email is not configured on this server (development mode, SLUICE_DEV_MAIL_LOG), " +
		"so the link that chooses the member's password is in the server's log. Pass it on yourself.",
	"updated": "Role changed. It applies from the member's next request.",
	"removed": "Member removed, and signed out.",
}

// listMembers is GET /members.
func (d *Dashboard) listMembers(w http.ResponseWriter, r *http.Request) error {
	return d.renderMembers(w, r, http.StatusOK, web.MembersView{Flash: memberFlashes[r.URL.Query().Get("done")], Role: sluice.RoleViewer})
}

func (d *Dashboard) renderMembers(w http.ResponseWriter, r *http.Request, status int, v web.MembersView) error {
	p, err := pageParams(r)
	if err != nil {
		return err
	}
	page, err := d.ctl.Members(r.Context(), caller(r), p)
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
	in := control.MemberInput{Email: strings.TrimSpace(r.PostForm.Get("email")), Role: sluice.Role(r.PostForm.Get("role"))}
	refill := web.MembersView{Email: in.Email, Role: in.Role}
	_, err := d.ctl.InviteMember(r.Context(), caller(r), in)
	if invalid(err) {
		refill.Error = fieldErrors(err)
		return d.renderMembers(w, r, http.StatusUnprocessableEntity, refill)
	}
	if errors.Is(err, sluice.ErrMailNotConfigured) {
		refill.Error = "Email is not configured on this server (SLUICE_SMTP_URL is not set), so no invitation can be sent. " +
			"Ask the server's operator to configure it."
		return d.renderMembers(w, r, http.StatusConflict, refill)
	}
	if errors.Is(err, sluice.ErrConflict) {
		refill.Error = "A member with this email exists already, in this account or another."
		return d.renderMembers(w, r, http.StatusConflict, refill)
	}
	if err != nil {
		return err
	}
	flash := memberFlashes["invited"]
	if d.ctl.MemberLinksLogged() {
		flash = memberFlashes["invited-logged"]
	}
	return d.renderMembers(w, r, http.StatusOK, web.MembersView{Flash: flash, Role: sluice.RoleViewer})
}

// pathMember is the member the path names.
func (d *Dashboard) pathMember(r *http.Request) (sluice.Member, error) {
	id, err := pathID(r)
	if err != nil {
		return sluice.Member{}, err
	}
	return d.ctl.Member(r.Context(), caller(r), id)
}

// updateMember is POST /members/{id}/edit: changes a member's role, from
// its next request on.
func (d *Dashboard) updateMember(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	role := sluice.Role(strings.TrimSpace(r.PostForm.Get("role")))
	_, err = d.ctl.SetMemberRole(r.Context(), caller(r), id, role)
	if invalid(err) {
		return errBadRequest("Choose a role from the list.")
	}
	if err != nil {
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
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if r.PostForm.Get("confirm") != "yes" {
		return redirect(w, r, r.URL.Path)
	}
	if err := d.ctl.RemoveMember(r.Context(), caller(r), id); err != nil {
		return err
	}
	if d.isSessionMember(r, id) {
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

package httpapi

import (
	"net/http"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// memberInput is the body of POST /v1/members.
type memberInput struct {
	Email *string `json:"email"`
	Role  *string `json:"role"`
}

// memberPatch is the body of PATCH /v1/members/{id}.
type memberPatch struct {
	Role *string `json:"role"`
}

func strValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// createMember is POST /v1/members: invites a member, whose invitation is
// emailed by a job queued with it (notify.MemberMailWorker), or written to
// the server's log in development mode, which the header Sluice-Mail:
// logged says.
func (a *API) createMember(w http.ResponseWriter, r *http.Request) error {
	var in memberInput
	if err := decodeJSON(w, r, &in, maxBodyBytes); err != nil {
		return err
	}
	m, err := a.ctl.InviteMember(r.Context(), caller(r), control.MemberInput{Email: strValue(in.Email), Role: sluice.Role(strValue(in.Role))})
	if err != nil {
		return err
	}
	if a.ctl.MemberLinksLogged() {
		w.Header().Set("Sluice-Mail", "logged")
	}
	writeJSON(w, http.StatusCreated, m)
	return nil
}

// listMembers is GET /v1/members.
func (a *API) listMembers(w http.ResponseWriter, r *http.Request) error {
	v := &sluice.ValidationError{}
	p := pageParams(r, v)
	if err := v.Err(); err != nil {
		return err
	}
	page, err := a.ctl.Members(r.Context(), caller(r), p)
	if err != nil {
		return err
	}
	writePage(w, page)
	return nil
}

// getMember is GET /v1/members/{id}.
func (a *API) getMember(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "member")
	if err != nil {
		return err
	}
	m, err := a.ctl.Member(r.Context(), caller(r), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

// updateMember is PATCH /v1/members/{id}: changes its role, which its
// dashboard sessions have from their next request on.
func (a *API) updateMember(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "member")
	if err != nil {
		return err
	}
	var in memberPatch
	if err := decodeJSON(w, r, &in, maxBodyBytes); err != nil {
		return err
	}
	m, err := a.ctl.SetMemberRole(r.Context(), caller(r), id, sluice.Role(strValue(in.Role)))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

// deleteMember is DELETE /v1/members/{id}: removes it, and its dashboard
// sessions end at once.
func (a *API) deleteMember(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "member")
	if err != nil {
		return err
	}
	if err := a.ctl.RemoveMember(r.Context(), caller(r), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

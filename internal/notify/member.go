package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/member"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// MemberLink is the email that carries a member's link to set its
// password: an invitation to a tenant's dashboard, or a reset the member
// asked for.
type MemberLink struct {
	Purpose    string // member.PurposeInvite or member.PurposeReset
	Email      string // the member's
	Role       sluice.Role
	TenantName string
	Link       string // member.PasswordLink
	Expires    time.Time
}

// Message renders the email.
func (m MemberLink) Message(messageID string) Message {
	var subject, intro string
	if m.Purpose == member.PurposeInvite {
		subject = "[Sluice] You are invited to " + m.TenantName
		intro = "You have been invited to the Sluice dashboard of " + m.TenantName + ", as " + article(string(m.Role)) + ".\n" +
			"Open this link to choose your password:"
	} else {
		subject = "[Sluice] Reset your password"
		intro = "Someone, hopefully you, asked to reset the password of " + m.Email + "\n" +
			"on the Sluice dashboard of " + m.TenantName + ". Open this link to choose a new one:"
	}
	var b strings.Builder
	b.WriteString(intro + "\n\n" + m.Link + "\n\n")
	fmt.Fprintf(&b, "The link works once, until %s.\n", formatTime(m.Expires))
	if m.Purpose == member.PurposeInvite {
		b.WriteString("Then sign in with " + m.Email + " and your password.\n")
	} else {
		b.WriteString("If you did not ask for it, ignore this email: your password stays as it is.\n")
	}
	return Message{To: m.Email, Subject: subject, Text: b.String(), MessageID: messageID}
}

// article is "an admin", "a viewer".
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an " + word
	}
	return "a " + word
}

// MemberMailWorker runs jobs.MemberMailArgs: it makes the link's token,
// stores its hash (member.TokenHash) and emails the link, so that the
// token exists nowhere but in the email. A retry after a failed send makes
// a new token; the one never sent is useless.
type MemberMailWorker struct {
	river.WorkerDefaults[jobs.MemberMailArgs]
	store     *store.Store
	mailer    *Mailer
	publicURL string
	now       func() time.Time
}

// NewMemberMailWorker returns the worker, sending with mailer links that
// point under publicURL; now is its clock (nil: time.Now), from which
// links expire after member.TokenTTL.
func NewMemberMailWorker(st *store.Store, mailer *Mailer, publicURL string, now func() time.Time) *MemberMailWorker {
	if now == nil {
		now = time.Now
	}
	return &MemberMailWorker{store: st, mailer: mailer, publicURL: strings.TrimSuffix(publicURL, "/"), now: now}
}

// Work sends the member its link, unless the member is gone or, for an
// invitation, has set its password already.
func (w *MemberMailWorker) Work(ctx context.Context, job *river.Job[jobs.MemberMailArgs]) error {
	var mm dbq.MemberForMailRow
	err := w.store.InTx(ctx, func(tx store.Tx) error {
		var err error
		mm, err = tx.Q.MemberForMail(ctx, job.Args.MemberID)
		if err != nil {
			return fmt.Errorf("member for mail: %w", err)
		}
		return nil
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // removed since
	}
	if err != nil {
		return fmt.Errorf("read member: %w", err)
	}
	if job.Args.Purpose == member.PurposeInvite && mm.Active {
		return nil
	}
	if !w.mailer.Enabled() {
		return river.JobCancel(errors.New("SLUICE_SMTP_URL is not set: member link not emailed")) //nolint:wrapcheck // River reads the cancel from the error it is given
	}
	token := member.NewToken()
	expires := w.now().Add(member.TokenTTL)
	err = store.Exec(ctx, w.store, (*dbq.Queries).InsertMemberToken, dbq.InsertMemberTokenParams{
		TokenHash: member.TokenHash(token), MemberID: mm.ID, Purpose: job.Args.Purpose, ExpiresAt: expires,
	})
	if errors.Is(err, sluice.ErrNotFound) {
		return nil // the member was removed meanwhile
	}
	if err != nil {
		return fmt.Errorf("insert member token: %w", err)
	}
	msg := MemberLink{
		Purpose: job.Args.Purpose, Email: mm.Email, Role: sluice.Role(mm.Role), TenantName: mm.TenantName,
		Link: member.PasswordLink(w.publicURL, token), Expires: expires,
	}.Message(fmt.Sprintf("<member-%s-%d.%d@sluice>", job.Args.Purpose, job.ID, job.Attempt))
	return w.mailer.Send(ctx, msg)
}

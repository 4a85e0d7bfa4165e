package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	cfg MemberMailConfig
}

// MemberMailConfig is what a MemberMailWorker needs.
type MemberMailConfig struct {
	Store *store.Store
	// Mailer sends the emails; one not Enabled sends none.
	Mailer *Mailer
	// PublicURL is SLUICE_PUBLIC_URL, under which the links point.
	PublicURL string
	// LogLinks writes each link to Logger when Mailer is not Enabled,
	// instead of dropping it (SLUICE_DEV_MAIL_LOG, set by `make run`).
	LogLinks bool
	// Logger is where LogLinks writes; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock from which links expire after member.TokenTTL; nil
	// means time.Now.
	Now func() time.Time
}

// NewMemberMailWorker returns the worker of cfg.
func NewMemberMailWorker(cfg MemberMailConfig) *MemberMailWorker {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.PublicURL = strings.TrimSuffix(cfg.PublicURL, "/")
	return &MemberMailWorker{cfg: cfg}
}

// Work sends the member its link, unless the member is gone or, for an
// invitation, has set its password already.
func (w *MemberMailWorker) Work(ctx context.Context, job *river.Job[jobs.MemberMailArgs]) error {
	var mm dbq.MemberForMailRow
	err := w.cfg.Store.InTx(ctx, func(tx store.Tx) error {
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
	mailing := w.cfg.Mailer.Enabled()
	if !mailing && !w.cfg.LogLinks {
		return river.JobCancel(errors.New("SLUICE_SMTP_URL is not set: member link not emailed")) //nolint:wrapcheck // River reads the cancel from the error it is given
	}
	token := member.NewToken()
	expires := w.cfg.Now().Add(member.TokenTTL)
	err = store.Exec(ctx, w.cfg.Store, (*dbq.Queries).InsertMemberToken, dbq.InsertMemberTokenParams{
		TokenHash: member.TokenHash(token), MemberID: mm.ID, Purpose: job.Args.Purpose, ExpiresAt: expires,
	})
	if errors.Is(err, sluice.ErrNotFound) {
		return nil // the member was removed meanwhile
	}
	if err != nil {
		return fmt.Errorf("insert member token: %w", err)
	}
	link := member.PasswordLink(w.cfg.PublicURL, token)
	if !mailing {
		w.cfg.Logger.WarnContext(ctx, "member link not emailed (SLUICE_SMTP_URL is not set): written here, as SLUICE_DEV_MAIL_LOG asks",
			"purpose", job.Args.Purpose, "email", mm.Email, "tenant", mm.TenantName, "link", link, "expires", expires)
		return nil
	}
	msg := MemberLink{
		Purpose: job.Args.Purpose, Email: mm.Email, Role: sluice.Role(mm.Role), TenantName: mm.TenantName,
		Link: link, Expires: expires,
	}.Message(fmt.Sprintf("<member-%s-%d.%d@sluice>", job.Args.Purpose, job.ID, job.Attempt))
	return w.cfg.Mailer.Send(ctx, msg)
}

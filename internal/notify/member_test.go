package notify_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/member"
	"github.com/sluice-dev/sluice/internal/notify"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
	"github.com/sluice-dev/sluice/internal/testkit/smtpsink"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestMemberMailWorker: the job emails the member a link to
// SLUICE_PUBLIC_URL/password whose token only the email holds (the
// database has its hash), working until 24 hours after the worker's clock;
// an invitation is not sent to a member who has set a password since, nor
// anything to a member removed since; without SMTP the job is cancelled.
func TestMemberMailWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := storetest.New(t)
	sink := smtpsink.Start(t)
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	w := notify.NewMemberMailWorker(notify.MemberMailConfig{Store: f.Store, Mailer: newMailer(t, sink.URL()),
		PublicURL: "https://sluice.example/", Now: func() time.Time { return now }})
	job := func(id int64, memberID string, purpose string) *river.Job[jobs.MemberMailArgs] {
		a := jobs.MemberMailArgs{Purpose: purpose}
		require.NoError(t, a.MemberID.UnmarshalText([]byte(memberID)))
		return &river.Job[jobs.MemberMailArgs]{JobRow: &rivertype.JobRow{ID: id, Attempt: 1}, Args: a}
	}
	ann, err := f.Store.AddMember(ctx, f.TenantA.ID, "ann@acme.test", sluice.RoleAdmin)
	require.NoError(t, err)

	require.NoError(t, w.Work(ctx, job(1, ann.ID.String(), member.PurposeInvite)))
	mails := sink.Wait(t, 1, 10*time.Second)
	m := mails[0]
	require.Equal(t, []string{"ann@acme.test"}, m.To)
	require.Equal(t, "[Sluice] You are invited to Acme", m.Subject)
	require.Contains(t, m.Text, "as an admin")
	require.Contains(t, m.Text, "until 2026-11-28 08:00:00 UTC")
	token := regexp.MustCompile(`https://sluice\.example/password\?token=([A-Za-z0-9_-]+)\n`).FindStringSubmatch(m.Text)
	require.NotNil(t, token, m.Text)
	var stored []byte
	require.NoError(t, f.Store.Pool().QueryRow(ctx, `SELECT token_hash FROM member_tokens WHERE member_id = $1`, ann.ID).Scan(&stored))
	require.Equal(t, member.TokenHash(token[1]), stored, "only the hash is kept")
	_, err = store.Read(ctx, f.Store, (*dbq.Queries).MemberByToken, dbq.MemberByTokenParams{TokenHash: stored, Now: now.Add(member.TokenTTL - time.Second)})
	require.NoError(t, err)

	// Once the invitation is accepted, a late copy of its job sends
	// nothing; a reset still goes out.
	_, err = f.Store.SetMemberPassword(ctx, stored, member.HashPassword("a long enough secret"), now)
	require.NoError(t, err)
	require.NoError(t, w.Work(ctx, job(2, ann.ID.String(), member.PurposeInvite)))
	require.NoError(t, w.Work(ctx, job(3, ann.ID.String(), member.PurposeReset)))
	mails = sink.Wait(t, 2, 10*time.Second)
	require.Len(t, mails, 2, "the invitation and the reset, nothing between")
	require.Equal(t, "[Sluice] Reset your password", mails[1].Subject)
	require.True(t, strings.Contains(mails[1].Text, "ignore this email"))

	// Removed: nothing to send.
	require.NoError(t, store.ExecRows(ctx, f.Store, (*dbq.Queries).DeleteMember, dbq.DeleteMemberParams{TenantID: f.TenantA.ID, ID: ann.ID}))
	require.NoError(t, w.Work(ctx, job(4, ann.ID.String(), member.PurposeReset)))

	bob, err := f.Store.AddMember(ctx, f.TenantA.ID, "bob@acme.test", sluice.RoleViewer)
	require.NoError(t, err)
	off, err := notify.NewMailer(notify.MailConfig{})
	require.NoError(t, err)
	err = notify.NewMemberMailWorker(notify.MemberMailConfig{Store: f.Store, Mailer: off, PublicURL: "https://sluice.example"}).Work(ctx, job(5, bob.ID.String(), member.PurposeInvite))
	var cancel *river.JobCancelError
	require.True(t, errors.As(err, &cancel), "%v", err)

	// The jobs ran one after another, so by now every email has arrived.
	require.NoError(t, w.Work(ctx, job(6, bob.ID.String(), member.PurposeInvite)))
	require.Len(t, sink.Wait(t, 3, 10*time.Second), 3)
	require.Equal(t, []string{"bob@acme.test"}, sink.Messages()[2].To)
}

// TestMemberMailWorkerLogsLinks: without SMTP and with SLUICE_DEV_MAIL_LOG
// the job writes the link to the log, and the link works as an emailed
// one would; an invitation accepted since is not logged again.
func TestMemberMailWorkerLogsLinks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := storetest.New(t)
	var logs bytes.Buffer
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	w := notify.NewMemberMailWorker(notify.MemberMailConfig{Store: f.Store, PublicURL: "http://127.0.0.1:8080",
		LogLinks: true, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Now: func() time.Time { return now }})
	ann, err := f.Store.AddMember(ctx, f.TenantA.ID, "ann@acme.test", sluice.RoleAdmin)
	require.NoError(t, err)
	args := jobs.MemberMailArgs{MemberID: ann.ID, Purpose: member.PurposeInvite}
	require.NoError(t, w.Work(ctx, &river.Job[jobs.MemberMailArgs]{JobRow: &rivertype.JobRow{ID: 1, Attempt: 1}, Args: args}))

	line := logs.String()
	require.Contains(t, line, "member link not emailed")
	require.Contains(t, line, "email=ann@acme.test")
	require.Contains(t, line, "purpose=invite")
	token := regexp.MustCompile(`link="?http://127\.0\.0\.1:8080/password\?token=([A-Za-z0-9_-]+)`).FindStringSubmatch(line)
	require.NotNil(t, token, line)
	_, err = f.Store.SetMemberPassword(ctx, member.TokenHash(token[1]), member.HashPassword("a long enough secret"), now)
	require.NoError(t, err, "the logged link sets the password")

	logs.Reset()
	require.NoError(t, w.Work(ctx, &river.Job[jobs.MemberMailArgs]{JobRow: &rivertype.JobRow{ID: 2, Attempt: 1}, Args: args}))
	require.Empty(t, logs.String(), "an accepted invitation is not logged again")
}

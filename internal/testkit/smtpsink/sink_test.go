package smtpsink_test

import (
	"net/smtp"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/smtpsink"
)

const qpMessage = "From: a@example.com\r\n" +
	"To: b@example.com\r\n" +
	"Subject: =?UTF-8?q?Gr=C3=BC=C3=9Fe?=\r\n" +
	"Message-ID: <m1@test>\r\n" +
	"Content-Type: text/plain; charset=UTF-8\r\n" +
	"Content-Transfer-Encoding: quoted-printable\r\n" +
	"\r\n" +
	"x=3D1 and a soft=\r\n" +
	" break\r\n" +
	".leading dot\r\n"

const multipartMessage = "From: a@example.com\r\n" +
	"To: b@example.com\r\n" +
	"Subject: multi\r\n" +
	"Content-Type: multipart/alternative; boundary=XX\r\n" +
	"\r\n" +
	"--XX\r\n" +
	"Content-Type: text/html\r\n" +
	"\r\n" +
	"<p>html</p>\r\n" +
	"--XX\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"Content-Transfer-Encoding: base64\r\n" +
	"\r\n" +
	"cGxhaW4gdGV4dCBib2R5IHRoYXQgaXMg\r\n" +
	"bG9uZw==\r\n" +
	"--XX--\r\n"

func TestSinkRecordsAndDecodes(t *testing.T) {
	t.Parallel()
	s := smtpsink.Start(t)
	require.True(t, strings.HasPrefix(s.URL(), "smtp://user:pass@127.0.0.1:"), s.URL())

	auth := smtp.PlainAuth("", "bob", "secret", "127.0.0.1")
	require.NoError(t, smtp.SendMail(s.Addr(), auth, "a@example.com", []string{"b@example.com", "c@example.com"}, []byte(qpMessage)))
	require.NoError(t, smtp.SendMail(s.Addr(), nil, "a@example.com", []string{"b@example.com"}, []byte(multipartMessage)))

	got := s.Wait(t, 2, 5*time.Second)
	require.Len(t, got, 2)

	m := got[0]
	require.NoError(t, m.ParseErr)
	require.Equal(t, "a@example.com", m.From)
	require.Equal(t, []string{"b@example.com", "c@example.com"}, m.To)
	require.Equal(t, "Grüße", m.Subject)
	require.Equal(t, "<m1@test>", m.MessageID)
	require.Equal(t, "x=1 and a soft break\n.leading dot\n", m.Text)
	require.Equal(t, qpMessage, string(m.Data))
	require.Equal(t, "bob", m.AuthUser)
	require.Equal(t, "secret", m.AuthPassword)

	m = got[1]
	require.NoError(t, m.ParseErr)
	require.Equal(t, "multi", m.Subject)
	require.Equal(t, "plain text body that is long", m.Text)
	require.Empty(t, m.AuthUser)
}

func TestSinkFailNext(t *testing.T) {
	t.Parallel()
	s := smtpsink.Start(t)
	s.FailNext(2)
	for range 2 {
		err := smtp.SendMail(s.Addr(), nil, "a@example.com", []string{"b@example.com"}, []byte(qpMessage))
		var tpErr *textproto.Error
		require.ErrorAs(t, err, &tpErr)
		require.Equal(t, 451, tpErr.Code)
	}
	require.Empty(t, s.Messages())
	require.NoError(t, smtp.SendMail(s.Addr(), nil, "a@example.com", []string{"b@example.com"}, []byte(qpMessage)))
	require.Len(t, s.Messages(), 1)
}

func TestSinkWaitWakesUp(t *testing.T) {
	t.Parallel()
	s := smtpsink.Start(t)
	s.TestSignals.Init(t)
	errc := make(chan error, 1)
	go func() {
		s.TestSignals.Waiting.WaitOrTimeout() // the message arrives while Wait waits
		errc <- smtp.SendMail(s.Addr(), nil, "a@example.com", []string{"b@example.com"}, []byte(qpMessage))
	}()
	got := s.Wait(t, 1, 5*time.Second)
	require.NoError(t, <-errc)
	require.Len(t, got, 1)

	got[0].Subject = "changed"
	require.Equal(t, "Grüße", s.Messages()[0].Subject, "Messages returns a copy")
}

func TestSinkUnparsableMessage(t *testing.T) {
	t.Parallel()
	s := smtpsink.Start(t)
	raw := "Subject: x\r\nContent-Type: multipart/mixed; boundary=\"B\r\n\r\nbody\r\n"
	require.NoError(t, smtp.SendMail(s.Addr(), nil, "a@example.com", []string{"b@example.com"}, []byte(raw)))
	m := s.Wait(t, 1, 5*time.Second)[0]
	require.Error(t, m.ParseErr)
	require.Equal(t, "x", m.Subject)
	require.Equal(t, raw, string(m.Data))
}

package notify_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/notify"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/smtpsink"
)

const from = "Sluice <alerts@sluice.localhost>"

func newMailer(t *testing.T, url string) *notify.Mailer {
	t.Helper()
	m, err := notify.NewMailer(notify.MailConfig{URL: url, From: from, Timeout: 5 * time.Second})
	require.NoError(t, err)
	require.True(t, m.Enabled())
	return m
}

var alertEndpoint = uuid.MustParse("0193a5c8-7d3e-7c6a-9d7e-2f5b8a1c4e90")

func openedAlert() notify.Alert {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	next := at.Add(time.Minute)
	return notify.Alert{
		Event: sluice.OpEvent{Type: sluice.OpEndpointCircuitOpened, Payload: sluice.OpPayload{
			EndpointID: alertEndpoint, Reason: sluice.ReasonFailures,
			URL:       "https://hooks.example.com/acme/orders/a-rather-long-path-so-quoted-printable-wraps?x=1&y=2",
			LastError: "status 500", Failures: 5, NextProbeAt: &next,
		}},
		TenantName:   "Acme Gmbh – Zürich",
		At:           at,
		DashboardURL: "http://sluice.localhost:8080/dashboard/endpoints/" + alertEndpoint.String(),
	}
}

func TestSendToSink(t *testing.T) {
	t.Parallel()
	sink := smtpsink.Start(t)
	m := newMailer(t, "smtp://"+sink.Addr()) // no credentials: no AUTH
	a := openedAlert()

	require.NoError(t, m.Send(t.Context(), a.Message("Ops <ops@acme.test>", "<alert-0193@sluice>")))

	got := sink.Wait(t, 1, 5*time.Second)
	require.Len(t, got, 1)
	g := got[0]
	require.NoError(t, g.ParseErr)
	require.Equal(t, "alerts@sluice.localhost", g.From)
	require.Equal(t, []string{"ops@acme.test"}, g.To)
	require.Equal(t, "[Sluice] Circuit opened: "+a.Event.Payload.URL, g.Subject)
	require.Equal(t, "<alert-0193@sluice>", g.MessageID)
	require.Contains(t, g.Text, a.Event.Payload.URL)
	require.Contains(t, g.Text, alertEndpoint.String())
	require.Contains(t, g.Text, "status 500")
	require.Contains(t, g.Text, a.DashboardURL)
	require.Contains(t, g.Text, a.TenantName)
	require.Empty(t, g.AuthUser)
	require.Contains(t, string(g.Data), "Auto-Submitted: auto-generated")
}

func TestSendWithAuth(t *testing.T) {
	t.Parallel()
	sink := smtpsink.Start(t)
	m := newMailer(t, "smtp://alice:p%40ss%3Aw%20rd@"+sink.Addr())

	require.NoError(t, m.Send(t.Context(), notify.Message{To: "ops@acme.test", Subject: "hi", Text: "hello", MessageID: "id-1@sluice"}))

	g := sink.Wait(t, 1, 5*time.Second)[0]
	require.Equal(t, "alice", g.AuthUser)
	require.Equal(t, "p@ss:w rd", g.AuthPassword)
	require.Equal(t, "<id-1@sluice>", g.MessageID, "brackets are added when missing")
	require.Equal(t, "hello\n", g.Text, "the message ends with a line break")
}

func TestSinkURLHasCredentials(t *testing.T) {
	t.Parallel()
	sink := smtpsink.Start(t)
	m := newMailer(t, sink.URL())
	require.NoError(t, m.Send(t.Context(), notify.Message{To: "ops@acme.test", Subject: "s", Text: "t"}))
	g := sink.Wait(t, 1, 5*time.Second)[0]
	require.Equal(t, "user", g.AuthUser)
	require.NotEmpty(t, g.MessageID, "go-mail generates one when MessageID is empty")
}

func TestSendTemporaryFailureThenSuccess(t *testing.T) {
	t.Parallel()
	sink := smtpsink.Start(t)
	m := newMailer(t, sink.URL())
	msg := openedAlert().Message("ops@acme.test", "<alert-1@sluice>")

	sink.FailNext(1)
	err := m.Send(t.Context(), msg)
	require.Error(t, err)
	require.Contains(t, err.Error(), "451")
	require.Empty(t, sink.Messages())

	require.NoError(t, m.Send(t.Context(), msg))
	got := sink.Wait(t, 1, 5*time.Second)
	require.Len(t, got, 1)
	require.Equal(t, "<alert-1@sluice>", got[0].MessageID)
}

func TestSendConcurrent(t *testing.T) {
	t.Parallel()
	sink := smtpsink.Start(t)
	m := newMailer(t, sink.URL())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			require.NoError(t, m.Send(context.Background(), notify.Message{To: "ops@acme.test", Subject: "s", Text: "t"}))
		})
	}
	wg.Wait()
	require.Len(t, sink.Wait(t, 8, 5*time.Second), 8)
}

func TestSubjectCannotInjectHeaders(t *testing.T) {
	t.Parallel()
	sink := smtpsink.Start(t)
	m := newMailer(t, sink.URL())
	require.NoError(t, m.Send(t.Context(), notify.Message{
		To: "ops@acme.test", Subject: "x\r\nBcc: evil@example.com", Text: "t", MessageID: "a\r\nX-Evil: 1",
	}))
	g := sink.Wait(t, 1, 5*time.Second)[0]
	require.Equal(t, []string{"ops@acme.test"}, g.To)
	require.Equal(t, "x  Bcc: evil@example.com", g.Subject)
	require.NotContains(t, string(g.Data), "\r\nBcc:")
	require.NotContains(t, string(g.Data), "\r\nX-Evil:")
}

func TestDisabled(t *testing.T) {
	t.Parallel()
	m, err := notify.NewMailer(notify.MailConfig{})
	require.NoError(t, err)
	require.False(t, m.Enabled())
	require.Empty(t, m.Addr())
	err = m.Send(t.Context(), notify.Message{To: "ops@acme.test", Subject: "s", Text: "t"})
	require.ErrorIs(t, err, notify.ErrDisabled)
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, from, want string }{
		{"http://x", from, "unsupported scheme"},
		{"smtp://", from, "missing host"},
		{"smtp:host", from, "missing host"},
		{"smtp://host:notaport", from, "invalid port"},
		{"smtp://host:0", from, "invalid port"},
		{"smtp://host:70000", from, "invalid port"},
		{"smtp://host:25/path", from, "unexpected path"},
		{"smtp://host:25?tls=1", from, "unexpected path"},
		{"://nope", from, "missing protocol scheme"},
		{"smtp://host", "", "SLUICE_SMTP_FROM is required"},
		{"smtp://host", "not an address", "invalid SLUICE_SMTP_FROM"},
	} {
		t.Run(tc.url+"|"+tc.from, func(t *testing.T) {
			t.Parallel()
			_, err := notify.NewMailer(notify.MailConfig{URL: tc.url, From: tc.from})
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestNewErrorHidesPassword(t *testing.T) {
	t.Parallel()
	_, err := notify.NewMailer(notify.MailConfig{URL: "smtp://u:hunter2@host:bad", From: from})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "hunter2")
}

func TestSendRejectsBadRecipient(t *testing.T) {
	t.Parallel()
	m := newMailer(t, "smtp://127.0.0.1:1")
	require.ErrorContains(t, m.Send(t.Context(), notify.Message{Subject: "s"}), "no recipient")
	require.ErrorContains(t, m.Send(t.Context(), notify.Message{To: "nope", Subject: "s"}), "invalid recipient")
}

// hangingServer accepts connections and never greets.
func hangingServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

func TestSendHonoursContext(t *testing.T) {
	t.Parallel()
	m := newMailer(t, "smtp://"+hangingServer(t))
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := m.Send(ctx, notify.Message{To: "ops@acme.test", Subject: "s", Text: "t"})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 3*time.Second)
}

func TestSendHonoursTimeout(t *testing.T) {
	t.Parallel()
	m, err := notify.NewMailer(notify.MailConfig{URL: "smtp://" + hangingServer(t), From: from, Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	start := time.Now()
	err = m.Send(t.Context(), notify.Message{To: "ops@acme.test", Subject: "s", Text: "t"})
	require.Error(t, err)
	require.Less(t, time.Since(start), 3*time.Second)
}

func TestSendConnectionRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	m := newMailer(t, "smtp://"+addr)
	err = m.Send(t.Context(), notify.Message{To: "ops@acme.test", Subject: "s", Text: "t"})
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), addr), err.Error())
}

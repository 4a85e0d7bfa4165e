// Package smtpsink is an in-process SMTP server for tests: it listens on
// 127.0.0.1:0, accepts any AUTH PLAIN credentials (or none), records every
// message and can be told to fail the next DATA commands with a 451.
package smtpsink

import (
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/riverqueue/river/rivershared/testsignal"

	"github.com/sluice-dev/sluice/internal/testkit/watch"
)

// Mail is one message the sink accepted.
type Mail struct {
	From      string   // envelope sender (MAIL FROM)
	To        []string // envelope recipients (RCPT TO)
	Data      []byte   // the raw message as received (CRLF line ends)
	Subject   string   // decoded Subject header
	MessageID string   // Message-ID header as sent, angle brackets included
	Text      string   // decoded text/plain body with "\n" line ends (go-mail ends it with one)
	// AuthUser and AuthPassword are the AUTH PLAIN credentials of the
	// session, empty when the client did not authenticate.
	AuthUser, AuthPassword string
	// ParseErr is set when the message could not be parsed; the header
	// and body fields are then incomplete.
	ParseErr error
}

// Sink is a running SMTP server. Its methods are safe for concurrent use.
type Sink struct {
	addr   string
	scheme string
	server *smtp.Server

	mails    watch.List[Mail]
	mu       sync.Mutex // guards failNext
	failNext int

	// TestSignals are for the sink's own tests: silent unless initialised.
	TestSignals TestSignals
}

// TestSignals tell the sink's own tests where it is.
type TestSignals struct {
	// Waiting carries how many messages Wait found, too few: it blocks
	// until the next one arrives.
	Waiting testsignal.TestSignal[int]
}

// Init makes the signals work; only tests call it, before using the sink.
func (ts *TestSignals) Init(tb testing.TB) { ts.Waiting.Init(tb) }

// Start runs a plain SMTP sink on 127.0.0.1:0 and stops it at t.Cleanup.
func Start(t testing.TB) *Sink {
	t.Helper()
	return start(t, nil)
}

// StartTLS runs a sink that speaks implicit TLS (smtps://) with cfg, which
// must hold a certificate; it stops at t.Cleanup.
func StartTLS(t testing.TB, cfg *tls.Config) *Sink {
	t.Helper()
	return start(t, cfg)
}

func start(t testing.TB, tlsConfig *tls.Config) *Sink {
	t.Helper()
	var ln net.Listener
	var err error
	s := &Sink{scheme: "smtp"}
	if tlsConfig != nil {
		s.scheme = "smtps"
		ln, err = tls.Listen("tcp", "127.0.0.1:0", tlsConfig)
	} else {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		t.Fatalf("smtpsink: listen: %v", err)
	}
	s.addr = ln.Addr().String()

	srv := smtp.NewServer(backend{s})
	srv.Domain = "smtpsink.localhost"
	srv.AllowInsecureAuth = true
	srv.MaxMessageBytes = 10 << 20
	srv.ReadTimeout = 30 * time.Second
	srv.WriteTimeout = 30 * time.Second
	srv.ErrorLog = log.New(io.Discard, "", 0) // the default logs every failed TLS handshake to stderr
	s.server = srv

	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, smtp.ErrServerClosed) {
			t.Errorf("smtpsink: serve: %v", err)
		}
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return s
}

// URL returns smtp://user:pass@127.0.0.1:port (smtps:// for StartTLS). Any
// credentials are accepted; they are recorded in Mail.AuthUser/AuthPassword.
func (s *Sink) URL() string {
	u := url.URL{Scheme: s.scheme, User: url.UserPassword("user", "pass"), Host: s.addr}
	return u.String()
}

// Addr returns the listening address, 127.0.0.1:port.
func (s *Sink) Addr() string { return s.addr }

// Messages returns a copy of the messages accepted so far, oldest first.
func (s *Sink) Messages() []Mail { return s.mails.Items() }

// Wait blocks until at least n messages were accepted and returns them all;
// it fails the test (t.Fatalf, so call it from the test goroutine) when
// timeout passes first.
func (s *Sink) Wait(t testing.TB, n int, timeout time.Duration) []Mail {
	t.Helper()
	got := 0
	enough := s.mails.Await(timeout, func(mails []Mail) bool {
		if got = len(mails); got >= n {
			return true
		}
		s.TestSignals.Waiting.Signal(got)
		return false
	})
	if !enough {
		t.Fatalf("smtpsink: got %d messages after %s, want at least %d", got, timeout, n)
		return nil
	}
	return s.mails.Items()
}

// FailNext makes the next n DATA commands answer "451 temporary failure"
// (after reading the message, which is then not recorded).
func (s *Sink) FailNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext = n
}

// deliver records m, or reports whether it must fail instead.
func (s *Sink) deliver(m Mail) (fail bool) {
	s.mu.Lock()
	if s.failNext > 0 {
		s.failNext--
		s.mu.Unlock()
		return true
	}
	s.mu.Unlock()
	s.mails.Add(m)
	return false
}

package smtpsink

import (
	"io"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// errTempFail is the DATA answer while FailNext is in effect.
var errTempFail = &smtp.SMTPError{
	Code:         451,
	EnhancedCode: smtp.EnhancedCode{4, 3, 0},
	Message:      "temporary failure (smtpsink FailNext), try again later",
}

// backend creates one session per connection.
type backend struct{ sink *Sink }

func (b backend) NewSession(*smtp.Conn) (smtp.Session, error) {
	return &session{sink: b.sink}, nil
}

// session is one SMTP connection; go-smtp calls it from one goroutine.
type session struct {
	sink           *Sink
	user, password string
	from           string
	to             []string
}

var _ smtp.AuthSession = (*session)(nil)

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, username, password string) error {
		s.user, s.password = username, password
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.from = from
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err //nolint:wrapcheck // go-smtp finds an *smtp.SMTPError (ErrDataTooLarge: 552) by type assertion, not errors.As
	}
	m := parse(data)
	m.From, m.To = s.from, append([]string(nil), s.to...)
	m.AuthUser, m.AuthPassword = s.user, s.password
	if s.sink.deliver(m) {
		return errTempFail
	}
	return nil
}

func (s *session) Reset() {
	s.from, s.to = "", nil
}

func (s *session) Logout() error { return nil }

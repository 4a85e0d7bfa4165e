package smtpsink

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strings"
)

// parse fills the header and body fields of a Mail from a raw message.
func parse(data []byte) Mail {
	m := Mail{Data: data}
	msg, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		m.ParseErr = err
		return m
	}
	dec := mime.WordDecoder{}
	m.Subject, err = dec.DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		m.Subject = msg.Header.Get("Subject")
	}
	m.MessageID = msg.Header.Get("Message-ID")
	text, err := textBody(msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body)
	m.Text = strings.ReplaceAll(text, "\r\n", "\n")
	m.ParseErr = err
	return m
}

// errNotText marks a part that is not text/plain.
var errNotText = errors.New("not text/plain")

// textBody returns the decoded first text/plain part of a body with the
// given Content-Type and Content-Transfer-Encoding.
func textBody(contentType, encoding string, body io.Reader) (string, error) {
	mediaType, params := "text/plain", map[string]string{}
	if contentType != "" {
		var err error
		if mediaType, params, err = mime.ParseMediaType(contentType); err != nil {
			return "", fmt.Errorf("content-type: %w", err)
		}
	}
	if strings.HasPrefix(mediaType, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart() // raw: NextPart would decode quoted-printable itself and drop the header
			if err != nil {
				return "", fmt.Errorf("no text/plain part: %w", err)
			}
			text, err := textBody(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p)
			if !errors.Is(err, errNotText) {
				return text, err
			}
		}
	}
	if mediaType != "text/plain" {
		return "", fmt.Errorf("%w: %s", errNotText, mediaType)
	}
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "quoted-printable":
		body = quotedprintable.NewReader(body)
	case "base64":
		body = base64.NewDecoder(base64.StdEncoding, body) // skips CR and LF itself
	}
	b, err := io.ReadAll(body)
	return string(b), err
}

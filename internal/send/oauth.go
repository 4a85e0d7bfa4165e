package send

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// TokenRequest asks a token endpoint for an access token with OAuth2
// client credentials (RFC 6749 §4.4): the client authenticates with HTTP
// Basic, scope and audience go as form fields when set.
type TokenRequest struct {
	URL          string
	ClientID     string
	ClientSecret []byte
	Scope        string
	Audience     string
	Timeout      time.Duration // bounds the request; 0: Config.Timeout
	// Deadline, when set, ends the request then if Timeout has not
	// already (the end of the lease it is asked under); either is
	// reported as a timeout after Timeout.
	Deadline time.Time
}

// Token is an access token and how long it lasts from when it was asked
// for (expires_in; sluice.DefaultTokenLifetime's when the endpoint gives
// none is the caller's choice: Lifetime is then 0).
type Token struct {
	AccessToken string
	Lifetime    time.Duration
}

// TokenError is a token request that failed: the attempt's failure, which
// names the token endpoint and its answer. Body is the first KiB of the
// answer, kept as an attempt's response body is.
type TokenError struct {
	URL        string
	StatusCode int // 0 when no answer came
	Reason     string
	Body       string
}

// Error implements error.
func (e *TokenError) Error() string {
	return "token endpoint " + e.URL + ": " + e.Reason
}

// FetchToken asks r's token endpoint for an access token, through the
// same address guard (and egress proxy) as deliveries. A failure is a
// *TokenError.
func (s *Sender) FetchToken(ctx context.Context, r TokenRequest) (Token, error) {
	fail := &TokenError{URL: r.URL}
	ctx, cancel := context.WithTimeoutCause(ctx, cmp.Or(r.Timeout, s.timeout), errTimeout)
	defer cancel()
	if !r.Deadline.IsZero() {
		var stop context.CancelFunc
		ctx, stop = context.WithDeadlineCause(ctx, r.Deadline, errTimeout)
		defer stop()
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	if r.Scope != "" {
		form.Set("scope", r.Scope)
	}
	if r.Audience != "" {
		form.Set("audience", r.Audience)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, strings.NewReader(form.Encode()))
	if err != nil {
		fail.Reason = "invalid URL: " + err.Error()
		return Token{}, fail
	}
	// RFC 6749 §2.3.1: the id and secret are form-encoded before Basic.
	req.SetBasicAuth(url.QueryEscape(r.ClientID), url.QueryEscape(string(r.ClientSecret)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", s.userAgent)
	resp, err := s.client.Do(req)
	if err != nil {
		if errors.Is(context.Cause(ctx), errTimeout) {
			fail.Reason = "timeout after " + cmp.Or(r.Timeout, s.timeout).String()
		} else {
			fail.Reason = describeErr(err)
		}
		return Token{}, fail
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	fail.StatusCode, fail.Body = resp.StatusCode, cleanBody(raw[:min(len(raw), bodyLimit)])
	if err != nil {
		fail.Reason = "reading the answer: " + describeErr(err)
		return Token{}, fail
	}
	if resp.StatusCode != http.StatusOK {
		fail.Reason = "status " + strconv.Itoa(resp.StatusCode)
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			fail.Reason += " (" + cleanBody([]byte(e.Error)) + ")"
		}
		return Token{}, fail
	}
	var tok struct {
		AccessToken string          `json:"access_token"`
		TokenType   string          `json:"token_type"`
		ExpiresIn   json.RawMessage `json:"expires_in"`
	}
	if err := json.Unmarshal(raw, &tok); err != nil || tok.AccessToken == "" {
		fail.Reason = "answered 200 without an access_token in a JSON object"
		return Token{}, fail
	}
	if !strings.EqualFold(tok.TokenType, "bearer") {
		fail.Reason = fmt.Sprintf("answered token_type %q; only bearer tokens are sent", tok.TokenType)
		return Token{}, fail
	}
	if strings.ContainsAny(tok.AccessToken, "\r\n") {
		fail.Reason = "answered an access_token that cannot be sent in a header"
		return Token{}, fail
	}
	var secs float64 // a number, or a number in a string, as some servers send it
	if len(tok.ExpiresIn) > 0 && json.Unmarshal(tok.ExpiresIn, &secs) != nil {
		var text string
		_ = json.Unmarshal(tok.ExpiresIn, &text)
		secs, _ = strconv.ParseFloat(text, 64)
	}
	return Token{AccessToken: tok.AccessToken, Lifetime: time.Duration(max(secs, 0) * float64(time.Second))}, nil
}

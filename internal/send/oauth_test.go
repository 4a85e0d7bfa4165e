package send_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/send"
)

func TestFetchToken(t *testing.T) {
	t.Parallel()
	type seen struct {
		id, secret string
		ok         bool
		form       map[string]string
	}
	asked := make(chan seen, 10)
	answer := make(chan func(http.ResponseWriter), 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		require.NoError(t, r.ParseForm())
		form := map[string]string{}
		for k := range r.PostForm {
			form[k] = r.PostForm.Get(k)
		}
		asked <- seen{id, secret, ok, form}
		(<-answer)(w)
	}))
	t.Cleanup(srv.Close)
	s := send.New(send.Config{AllowPrivate: true})
	req := send.TokenRequest{URL: srv.URL + "/token", ClientID: "sluice:a", ClientSecret: []byte("s3cr&t"), Scope: "hooks", Audience: "https://api"}
	reply := func(status int, body string) {
		answer <- func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}
	}

	reply(200, `{"access_token": "tok-1", "token_type": "Bearer", "expires_in": 3600}`)
	tok, err := s.FetchToken(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, send.Token{AccessToken: "tok-1", Lifetime: time.Hour}, tok)
	got := <-asked
	require.True(t, got.ok, "HTTP Basic")
	require.Equal(t, "sluice%3Aa", got.id, "form-encoded before Basic (RFC 6749 2.3.1)")
	require.Equal(t, "s3cr%26t", got.secret)
	require.Equal(t, map[string]string{"grant_type": "client_credentials", "scope": "hooks", "audience": "https://api"}, got.form)

	reply(200, `{"access_token": "tok-2", "token_type": "bearer", "expires_in": "60"}`)
	tok, err = s.FetchToken(context.Background(), send.TokenRequest{URL: srv.URL, ClientID: "c", ClientSecret: []byte("s")})
	require.NoError(t, err)
	require.Equal(t, send.Token{AccessToken: "tok-2", Lifetime: time.Minute}, tok)
	require.Equal(t, map[string]string{"grant_type": "client_credentials"}, (<-asked).form, "no scope or audience unless set")

	for _, tc := range []struct {
		status     int
		body, says string
	}{
		{401, `{"error": "invalid_client"}` + strings.Repeat(" ", 2000), "status 401 (invalid_client)"},
		{500, `down`, "status 500"},
		{200, `{"token_type": "bearer"}`, "without an access_token"},
		{200, `{"access_token": "x", "token_type": "mac"}`, `token_type "mac"`},
	} {
		reply(tc.status, tc.body)
		_, err := s.FetchToken(context.Background(), req)
		<-asked
		var te *send.TokenError
		require.True(t, errors.As(err, &te), tc.says)
		require.True(t, strings.HasPrefix(err.Error(), "token endpoint "+srv.URL+"/token: "), err.Error())
		require.Contains(t, err.Error(), tc.says)
		require.Equal(t, tc.status, te.StatusCode)
		require.Equal(t, tc.body[:min(len(tc.body), 1024)], te.Body, "the first KiB kept")
	}

	// No answer: the attempt fails naming the token endpoint.
	_, err = s.FetchToken(context.Background(), send.TokenRequest{URL: "http://127.0.0.1:1/token", ClientID: "c"})
	require.ErrorContains(t, err, "token endpoint http://127.0.0.1:1/token: connection refused")
}

// The guard holds for token endpoints as for receivers.
func TestFetchTokenGuarded(t *testing.T) {
	t.Parallel()
	s := send.New(send.Config{})
	_, err := s.FetchToken(context.Background(), send.TokenRequest{URL: "http://127.0.0.1:9/token", ClientID: "c"})
	require.EqualError(t, err, "token endpoint http://127.0.0.1:9/token: destination address is not allowed (private/loopback)")
}

// Send carries the access token as "Authorization: Bearer".
func TestSendBearer(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got <- r.Header.Get("Authorization") }))
	t.Cleanup(srv.Close)
	s := send.New(send.Config{AllowPrivate: true})
	res := s.Send(context.Background(), send.Message{URL: srv.URL, ID: "msg_1", Body: []byte(`{}`), Bearer: "tok",
		Headers: map[string]string{"Authorization": "Basic static"}})
	require.True(t, res.Delivered(), res.Err)
	require.Equal(t, "Bearer tok", <-got)
}

package control_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// authJSON is an auth option as JSON: the fields given over a valid one
// (token_url, client_id, client_secret), "" leaving a field out.
func authJSON(t *testing.T, fields map[string]any) string {
	t.Helper()
	obj := map[string]any{"type": "oauth2_client_credentials", "token_url": "https://127.0.0.1:9/token",
		"client_id": "sluice", "client_secret": "s3cret"}
	for k, v := range fields {
		if v == "" {
			delete(obj, k)
			continue
		}
		obj[k] = v
	}
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	return string(b)
}

func TestAuthOption(t *testing.T) {
	t.Parallel()
	b := setupEndpoints(t)
	ctx := context.Background()
	secretSet := func(ep sluice.Endpoint) bool {
		set, err := b.f.Store.EndpointAuthSecretSet(ctx, ep.ID)
		require.NoError(t, err)
		return set
	}

	ep := b.create(t, b.owner, control.EndpointInput{Options: options("auth", authJSON(t, map[string]any{"scope": "hooks:write", "audience": "https://api.example"}))}).Endpoint
	require.Equal(t, &sluice.AuthOption{Type: "oauth2_client_credentials", TokenURL: "https://127.0.0.1:9/token", ClientID: "sluice",
		Scope: "hooks:write", Audience: "https://api.example", ClientSecretSet: true}, ep.Auth)
	require.True(t, secretSet(ep), "sealed in its row")
	read, err := json.Marshal(ep)
	require.NoError(t, err)
	require.NotContains(t, string(read), "s3cret")
	require.Contains(t, string(read), `"client_secret_set":true`)

	// A PATCH that does not name auth keeps it; one that sends it back
	// without the secret (or the read whole) keeps the stored secret.
	got, err := b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("timeout_seconds", "5")})
	require.NoError(t, err)
	require.Equal(t, ep.Auth, got.Auth)
	back, err := json.Marshal(got.Auth)
	require.NoError(t, err)
	got, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("auth", string(back))})
	require.NoError(t, err)
	require.Equal(t, ep.Auth, got.Auth)
	require.Empty(t, b.auditLog(t, b.owner)[0].Changed, "the same option sent back changes nothing")

	// A new secret is a change; so is a new scope, the option replaced whole.
	_, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("auth", authJSON(t, map[string]any{"client_secret": "other"}))})
	require.NoError(t, err)
	require.Equal(t, []string{"auth"}, b.auditLog(t, b.owner)[0].Changed)
	got, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("auth", authJSON(t, map[string]any{"client_secret": ""}))})
	require.NoError(t, err)
	require.Empty(t, got.Auth.Scope)
	require.True(t, got.Auth.ClientSecretSet)

	// null removes the option and its secret.
	got, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("auth", "null")})
	require.NoError(t, err)
	require.Nil(t, got.Auth)
	require.False(t, secretSet(got))
	// Set again, it needs its secret again.
	_, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("auth", authJSON(t, map[string]any{"client_secret": ""}))})
	require.Equal(t, []string{"auth.client_secret"}, fields(t, err))
}

func TestAuthOptionRefused(t *testing.T) {
	t.Parallel()
	b := setupEndpoints(t)
	ctx := context.Background()
	ep := b.create(t, b.owner, control.EndpointInput{Options: options("auth", authJSON(t, nil))}).Endpoint

	for name, tc := range map[string]struct {
		value  string
		fields []string
		says   string
	}{
		"not an object":      {`"on"`, []string{"auth"}, "must be null or an object"},
		"a field it has not": {authJSON(t, map[string]any{"grant_type": "password"}), []string{"auth"}, "unknown field"},
		"no type":            {authJSON(t, map[string]any{"type": ""}), []string{"auth.type"}, `must be "oauth2_client_credentials"`},
		"another type":       {authJSON(t, map[string]any{"type": "basic"}), []string{"auth.type"}, `must be "oauth2_client_credentials"`},
		"no token_url":       {authJSON(t, map[string]any{"token_url": ""}), []string{"auth.token_url"}, "is required"},
		"relative token_url": {authJSON(t, map[string]any{"token_url": "/token"}), []string{"auth.token_url"}, "must be an absolute URL"},
		"token_url ftp":      {authJSON(t, map[string]any{"token_url": "ftp://127.0.0.1/token"}), []string{"auth.token_url"}, "must use http or https"},
		"token_url userinfo": {authJSON(t, map[string]any{"token_url": "https://a:b@127.0.0.1/token"}), []string{"auth.token_url"}, "username or password"},
		"token_url metadata": {authJSON(t, map[string]any{"token_url": "http://169.254.169.254/token"}), []string{"auth.token_url"}, "metadata"},
		"token_url legacy":   {authJSON(t, map[string]any{"token_url": "http://2130706433/token"}), []string{"auth.token_url"}, "usual form"},
		"token_url a number": {authJSON(t, map[string]any{"token_url": 7}), []string{"auth"}, "must be null or an object"},
		"no client_id":       {authJSON(t, map[string]any{"client_id": ""}), []string{"auth.client_id"}, "is required"},
		"blank client_id":    {authJSON(t, map[string]any{"client_id": "  "}), []string{"auth.client_id"}, "is required"},
		"long client_id":     {authJSON(t, map[string]any{"client_id": strings.Repeat("x", sluice.MaxAuthFieldLength+1)}), []string{"auth.client_id"}, "at most"},
		"blank secret":       {authJSON(t, map[string]any{"client_secret": " "}), []string{"auth.client_secret"}, "is required"},
		"scope newline":      {authJSON(t, map[string]any{"scope": "a\nb"}), []string{"auth.scope"}, "control characters"},
		"long audience":      {authJSON(t, map[string]any{"audience": strings.Repeat("x", sluice.MaxAuthFieldLength+1)}), []string{"auth.audience"}, "at most"},
		"three at once": {authJSON(t, map[string]any{"type": "x", "client_id": "", "token_url": "ftp://x"}),
			[]string{"auth.type", "auth.client_id", "auth.token_url"}, "must"},
	} {
		in := control.EndpointInput{Options: options("auth", tc.value)}
		_, err := b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, in)
		require.ElementsMatch(t, tc.fields, fields(t, err), name)
		require.Contains(t, err.Error(), tc.says, name)
		in.URL = new("https://127.0.0.1:9/x")
		_, err = b.ctl.CreateEndpoint(ctx, b.owner, in)
		require.ElementsMatch(t, tc.fields, fields(t, err), name)
	}
	_, err := b.ctl.CreateEndpoint(ctx, b.owner, control.EndpointInput{URL: new("https://127.0.0.1:9/x"),
		Options: options("auth", authJSON(t, map[string]any{"client_secret": ""}))})
	require.Equal(t, []string{"auth.client_secret"}, fields(t, err), "a new endpoint has no secret to keep")

	// Without SLUICE_ALLOW_PRIVATE_TARGETS a token URL is held to https
	// and public addresses, as url is.
	strict := control.New(control.Config{Store: b.f.Store, Nudger: b.nudges, PublicURL: "https://sluice.test/"})
	for _, u := range []string{"http://token.example/t", "https://127.0.0.1/t", "https://localhost/t"} {
		_, err := strict.CreateEndpoint(ctx, b.owner, control.EndpointInput{URL: new("https://hooks.example/x"),
			Options: options("auth", authJSON(t, map[string]any{"token_url": u}))})
		require.Equal(t, []string{"auth.token_url"}, fields(t, err), u)
	}

	got, err := b.ctl.Endpoint(ctx, b.owner, ep.ID)
	require.NoError(t, err)
	require.Equal(t, ep.Auth, got.Auth, "a refused update changes nothing")
}

// The form's auth fields: all empty is no option, an empty secret keeps
// the stored one, and the type is implied.
func TestFormAuth(t *testing.T) {
	t.Parallel()
	require.JSONEq(t, `null`, string(control.FormOptions(map[string]string{})["auth"]))
	require.JSONEq(t, `{"type": "oauth2_client_credentials", "token_url": "https://t", "client_id": "c", "scope": "s"}`,
		string(control.FormOptions(map[string]string{"auth.token_url": " https://t ", "auth.client_id": "c", "auth.client_secret": " ", "auth.scope": "s"})["auth"]))
}

package control

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// The rules of the auth delivery option: {"type":
// "oauth2_client_credentials", "token_url", "client_id", "client_secret",
// "scope"?, "audience"?}. The option is replaced as a whole; only the
// secret may be left out, to keep the stored one. A read shows
// client_secret_set beside the rest: a request may send it back. The
// token URL passes the address checks of the endpoint's url
// (checkTokenURL, from checkSettings).

// authInput is the auth option as a request writes it.
type authInput struct {
	Type         *string `json:"type"`
	TokenURL     *string `json:"token_url"`
	ClientID     *string `json:"client_id"`
	ClientSecret *string `json:"client_secret"`
	Scope        *string `json:"scope"`
	Audience     *string `json:"audience"`
	// What a read shows beside them, taken back and ignored.
	ClientSecretSet json.RawMessage `json:"client_secret_set"`
}

// authOption reads an auth option that is not null. Whether a secret is
// stored when the request sends none is checked when it is saved
// (saveAuth); the token URL's address, with the endpoint's (checkTokenURL).
func authOption(raw json.RawMessage, v *sluice.ValidationError) *sluice.AuthOption {
	var in authInput
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		v.Add("auth", `must be null or an object with type "oauth2_client_credentials", token_url, client_id, client_secret, scope and audience (%s)`, jsonReason(err))
		return nil
	}
	if in.Type == nil || *in.Type != sluice.AuthOAuth2ClientCredentials {
		v.Add("auth.type", "must be %q", sluice.AuthOAuth2ClientCredentials)
	}
	text := func(field string, p *string, required bool) string {
		s := ""
		if p != nil {
			s = strings.TrimSpace(*p)
		}
		switch {
		case s == "" && required:
			v.Add("auth."+field, "is required")
		case len(s) > sluice.MaxAuthFieldLength:
			v.Add("auth."+field, "must be at most %d characters", sluice.MaxAuthFieldLength)
		case strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }):
			v.Add("auth."+field, "must not contain control characters")
		}
		return s
	}
	opt := &sluice.AuthOption{
		Type:            sluice.AuthOAuth2ClientCredentials,
		TokenURL:        text("token_url", in.TokenURL, false), // required, and checked, by checkTokenURL
		ClientID:        text("client_id", in.ClientID, true),
		Scope:           text("scope", in.Scope, false),
		Audience:        text("audience", in.Audience, false),
		ClientSecretSet: true, // or saveAuth refuses it
	}
	if in.ClientSecret != nil {
		opt.ClientSecret = []byte(text("client_secret", in.ClientSecret, true))
	}
	return opt // even when refused, so that checkTokenURL names its failures too
}

// checkTokenURL checks the auth option's token URL as the endpoint's url
// is checked (checkTargetURL): the token is fetched through the same
// address guard.
func checkTokenURL(o *sluice.AuthOption, allowPrivate bool, v *sluice.ValidationError) {
	if o == nil {
		return
	}
	var u sluice.ValidationError
	checkTargetURL(o.TokenURL, allowPrivate, &u)
	for _, f := range u.Fields {
		v.Add("auth.token_url", "%s", f.Message)
	}
}

// saveAuth saves the client secret of endpoint id's auth option as a
// request named in changed it from before to after (nothing when the
// request did not name auth): removed with the option, replaced by the
// secret sent, or kept when the request sent none, if one is stored. Any
// other change drops the shared token, fetched under the settings before.
func (c *Control) saveAuth(ctx context.Context, id uuid.UUID, in OptionsInput, before, after *sluice.AuthOption) error {
	if _, named := in["auth"]; !named {
		return nil
	}
	if after == nil {
		return c.store.DeleteEndpointAuth(ctx, id) //nolint:wrapcheck // the store says what failed
	}
	if after.ClientSecret != nil {
		return c.store.SetEndpointAuth(ctx, id, after.ClientSecret) //nolint:wrapcheck // the store says what failed
	}
	set, err := c.store.EndpointAuthSecretSet(ctx, id)
	if err != nil {
		return err //nolint:wrapcheck // the store says what failed
	}
	if !set {
		v := &sluice.ValidationError{}
		v.Add("auth.client_secret", "is required: the secret of client_id at the token endpoint")
		return v
	}
	if before != nil && sameAuth(*before, *after) {
		return nil
	}
	return c.store.SetEndpointAuth(ctx, id, nil) //nolint:wrapcheck // the store says what failed
}

// sameAuth reports whether two auth options ask the token endpoint for
// the same token, their secrets aside.
func sameAuth(a, b sluice.AuthOption) bool {
	return a.Type == b.Type && a.TokenURL == b.TokenURL && a.ClientID == b.ClientID &&
		a.Scope == b.Scope && a.Audience == b.Audience
}

// formAuth is the auth option of a form's fields (sluice.AuthFormFields):
// null when all are empty; an empty secret keeps the stored one.
func formAuth(texts map[string]string) json.RawMessage {
	obj := map[string]string{}
	for _, f := range sluice.AuthFormFields {
		if text := strings.TrimSpace(texts[f]); text != "" {
			obj[strings.TrimPrefix(f, "auth.")] = text
		}
	}
	if len(obj) == 0 {
		return json.RawMessage("null")
	}
	obj["type"] = sluice.AuthOAuth2ClientCredentials
	raw, _ := json.Marshal(obj) // strings alone
	return raw
}

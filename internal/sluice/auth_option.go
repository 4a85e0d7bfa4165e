package sluice

import "time"

// AuthOption is an endpoint's delivery option auth: OAuth2 client
// credentials (RFC 6749 §4.4). Sluice gets an access token from TokenURL,
// authenticated as ClientID with ClientSecret (HTTP Basic), and sends it
// as "Authorization: Bearer" on every attempt; the token is shared by
// every worker process through the store until shortly before it expires
// (TokenRefreshMargin).
type AuthOption struct {
	// Type is AuthOAuth2ClientCredentials, the one kind there is.
	Type     string `json:"type"`
	TokenURL string `json:"token_url"`
	ClientID string `json:"client_id"`
	// Scope and Audience, when set, are sent as form fields of the token
	// request.
	Scope    string `json:"scope,omitempty"`
	Audience string `json:"audience,omitempty"`
	// ClientSecretSet is what a read shows of the secret.
	ClientSecretSet bool `json:"client_secret_set"`
	// ClientSecret is the secret as a request gives it: write-only, kept
	// sealed in a column of its own, never in the options document; nil
	// when read, and when a request keeps the stored secret.
	ClientSecret []byte `json:"-"`
}

// AuthOAuth2ClientCredentials is the type of the auth option.
const AuthOAuth2ClientCredentials = "oauth2_client_credentials"

// Bounds of the auth option's fields.
const (
	MaxAuthFieldLength = 1024
	// DefaultTokenLifetime is a token's lifetime when its token endpoint
	// gives no expires_in.
	DefaultTokenLifetime = 10 * time.Minute
)

// TokenRefreshMargin is how long before a token of lifetime d expires a
// new one is fetched: a tenth of it, at most a minute.
func TokenRefreshMargin(d time.Duration) time.Duration {
	return min(d/10, time.Minute)
}

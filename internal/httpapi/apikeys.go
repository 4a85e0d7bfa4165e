package httpapi

import (
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// apiKeyInput is the body of POST /v1/api-keys. ExpiresAt stays a string so
// that a malformed time is a validation error naming the field.
type apiKeyInput struct {
	Name      *string `json:"name"`
	ExpiresAt *string `json:"expires_at"`
}

// params reads in; a malformed time is refused here, the rest by
// control.CreateAPIKey.
func (in apiKeyInput) params() (sluice.NewAPIKeyParams, error) {
	var p sluice.NewAPIKeyParams
	if in.Name != nil {
		p.Name = *in.Name
	}
	if in.ExpiresAt != nil {
		t, err := time.Parse(time.RFC3339, *in.ExpiresAt)
		if err != nil {
			v := &sluice.ValidationError{}
			v.Add("expires_at", "must be an RFC 3339 time such as 2030-01-02T15:04:05Z")
			return p, v
		}
		p.ExpiresAt = &t
	}
	return p, nil
}

// createAPIKey is POST /v1/api-keys: the only answer that shows the key.
func (a *API) createAPIKey(w http.ResponseWriter, r *http.Request) error {
	var in apiKeyInput
	if err := decodeJSON(w, r, &in, maxBodyBytes); err != nil {
		return err
	}
	p, err := in.params()
	if err != nil {
		return err
	}
	key, err := a.ctl.CreateAPIKey(r.Context(), caller(r), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, key)
	return nil
}

// listAPIKeys is GET /v1/api-keys: never the keys themselves.
func (a *API) listAPIKeys(w http.ResponseWriter, r *http.Request) error {
	v := &sluice.ValidationError{}
	p := pageParams(r, v)
	if err := v.Err(); err != nil {
		return err
	}
	page, err := a.ctl.APIKeys(r.Context(), caller(r), p)
	if err != nil {
		return err
	}
	writePage(w, page)
	return nil
}

// revokeAPIKey is DELETE /v1/api-keys/{id}: the key answers 401 within a
// second on every process, and its dashboard sessions end at once. A
// tenant may revoke the key it calls with.
func (a *API) revokeAPIKey(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "API key")
	if err != nil {
		return err
	}
	if err := a.ctl.RevokeAPIKey(r.Context(), caller(r), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

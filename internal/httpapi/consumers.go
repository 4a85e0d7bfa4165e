package httpapi

import (
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// consumerInput is the body of PUT /v1/consumers/{uid}: the whole consumer
// (a field left out is cleared).
type consumerInput struct {
	Name       *string `json:"name"`
	AlertEmail *string `json:"alert_email"`
}

func (in consumerInput) input() control.ConsumerInput {
	var name string
	if in.Name != nil {
		name = *in.Name
	}
	return control.ConsumerInput{Name: name, AlertEmail: in.AlertEmail}
}

// pathUID parses the {uid} path parameter; a malformed uid names no
// consumer, so it answers 404 like an unknown one.
func pathUID(r *http.Request) (string, error) {
	uid := chi.URLParam(r, "uid")
	if !sluice.ValidConsumerUID(uid) {
		return "", notFoundProblem(fmt.Sprintf("%q is not a valid consumer uid: it %s", uid, sluice.ConsumerUIDRule))
	}
	return uid, nil
}

// consumerParam reads the optional ?consumer= filter.
func consumerParam(r *http.Request, v *sluice.ValidationError) *string {
	raw := r.URL.Query().Get("consumer")
	switch {
	case raw == "":
		return nil
	case !sluice.ValidConsumerUID(raw):
		v.Add("consumer", sluice.ConsumerUIDRule)
		return nil
	}
	return &raw
}

// putConsumer is PUT /v1/consumers/{uid}: 201 when it created the
// consumer, 200 when it updated it.
func (a *API) putConsumer(w http.ResponseWriter, r *http.Request) error {
	uid, err := pathUID(r)
	if err != nil {
		return err
	}
	var in consumerInput
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &in, maxBodyBytes); err != nil {
			return err
		}
	}
	c, created, err := a.ctl.PutConsumer(r.Context(), caller(r), uid, in.input())
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, c)
	return nil
}

func (a *API) listConsumers(w http.ResponseWriter, r *http.Request) error {
	v := &sluice.ValidationError{}
	p := pageParams(r, v)
	if err := v.Err(); err != nil {
		return err
	}
	page, err := a.ctl.Consumers(r.Context(), caller(r), p)
	if err != nil {
		return err
	}
	writePage(w, page)
	return nil
}

func (a *API) getConsumer(w http.ResponseWriter, r *http.Request) error {
	uid, err := pathUID(r)
	if err != nil {
		return err
	}
	c, err := a.ctl.Consumer(r.Context(), caller(r), uid)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (a *API) deleteConsumer(w http.ResponseWriter, r *http.Request) error {
	uid, err := pathUID(r)
	if err != nil {
		return err
	}
	if err := a.ctl.DeleteConsumer(r.Context(), caller(r), uid); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// portalInput is the body of POST /v1/consumers/{uid}/portal.
type portalInput struct {
	TTLSeconds *int64 `json:"ttl_seconds"`
	ReadOnly   bool   `json:"read_only"`
}

// createPortalLink is POST /v1/consumers/{uid}/portal: a signed link that
// signs the consumer in to its portal until it expires or is revoked.
func (a *API) createPortalLink(w http.ResponseWriter, r *http.Request) error {
	uid, err := pathUID(r)
	if err != nil {
		return err
	}
	var in portalInput
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &in, maxBodyBytes); err != nil {
			return err
		}
	}
	link, err := a.ctl.CreatePortalLink(r.Context(), caller(r), uid, control.PortalLinkInput{TTLSeconds: in.TTLSeconds, ReadOnly: in.ReadOnly})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, link)
	return nil
}

// revokePortal is POST /v1/consumers/{uid}/portal/revoke: every link and
// portal session of the consumer ends at once.
func (a *API) revokePortal(w http.ResponseWriter, r *http.Request) error {
	uid, err := pathUID(r)
	if err != nil {
		return err
	}
	if err := a.ctl.RevokePortal(r.Context(), caller(r), uid); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/tenantrules"
)

// consumerInput is the body of PUT /v1/consumers/{uid}: the whole consumer
// (a field left out is cleared).
type consumerInput struct {
	Name       *string `json:"name"`
	AlertEmail *string `json:"alert_email"`
}

func (in consumerInput) settings() (sluice.ConsumerSettings, error) {
	var name string
	if in.Name != nil {
		name = *in.Name
	}
	return tenantrules.Consumer(name, in.AlertEmail)
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
	set, err := in.settings()
	if err != nil {
		return err
	}
	c, created, err := a.store.UpsertConsumer(r.Context(), tenantFrom(r.Context()).ID, uid, set)
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
	page, err := a.store.ListConsumers(r.Context(), tenantFrom(r.Context()).ID, p)
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
	c, err := a.store.GetConsumer(r.Context(), tenantFrom(r.Context()).ID, uid)
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
	if err := a.store.DeleteConsumer(r.Context(), tenantFrom(r.Context()).ID, uid); err != nil {
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
	ttl := tenantrules.DefaultPortalTTL
	if in.TTLSeconds != nil {
		ttl = time.Duration(*in.TTLSeconds) * time.Second
		if *in.TTLSeconds < 1 || ttl > tenantrules.MaxPortalTTL {
			v := &sluice.ValidationError{}
			v.Add("ttl_seconds", "must be a whole number of seconds from 1 to %d (7 days)", int64(tenantrules.MaxPortalTTL/time.Second))
			return v
		}
	}
	link, err := a.portal.Link(r.Context(), tenantFrom(r.Context()).ID, uid, ttl, in.ReadOnly)
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
	if err := a.store.RevokePortal(r.Context(), tenantFrom(r.Context()).ID, uid); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

package httpapi

import (
	"errors"
	"net/http"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/endpointrules"
	"github.com/sluice-dev/sluice/internal/sluice"
)

type subscriptionInput struct {
	EndpointID *string  `json:"endpoint_id"`
	EventTypes []string `json:"event_types"`
}

func (in subscriptionInput) validate() (uuid.UUID, error) {
	v := &sluice.ValidationError{}
	var endpointID uuid.UUID
	if in.EndpointID == nil {
		v.Add("endpoint_id", "is required")
	} else if id, err := uuid.Parse(*in.EndpointID); err != nil {
		v.Add("endpoint_id", "%q is not a valid id", *in.EndpointID)
	} else {
		endpointID = id
	}
	endpointrules.Patterns("event_types", in.EventTypes, v)
	return endpointID, v.Err()
}

func (a *API) createSubscription(w http.ResponseWriter, r *http.Request) error {
	var in subscriptionInput
	if err := decodeJSON(w, r, &in, maxBodyBytes); err != nil {
		return err
	}
	endpointID, err := in.validate()
	if err != nil {
		return err
	}
	sub, err := a.store.CreateSubscription(r.Context(), tenantFrom(r.Context()).ID, endpointID, in.EventTypes)
	if errors.Is(err, sluice.ErrNotFound) {
		return notFoundProblem("no endpoint with id " + endpointID.String())
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, sub)
	return nil
}

func (a *API) listSubscriptions(w http.ResponseWriter, r *http.Request) error {
	v := &sluice.ValidationError{}
	p := pageParams(r, v)
	endpointID := queryID(r, "endpoint_id", v)
	if err := v.Err(); err != nil {
		return err
	}
	page, err := a.store.ListSubscriptions(r.Context(), tenantFrom(r.Context()).ID, endpointID, p)
	if err != nil {
		return err
	}
	writePage(w, page)
	return nil
}

func (a *API) getSubscription(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "subscription")
	if err != nil {
		return err
	}
	sub, err := a.store.GetSubscription(r.Context(), tenantFrom(r.Context()).ID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sub)
	return nil
}

func (a *API) deleteSubscription(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "subscription")
	if err != nil {
		return err
	}
	if err := a.store.DeleteSubscription(r.Context(), tenantFrom(r.Context()).ID, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

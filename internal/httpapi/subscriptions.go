package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

type subscriptionInput struct {
	EndpointID *string         `json:"endpoint_id"`
	EventTypes []string        `json:"event_types"`
	Filter     json.RawMessage `json:"filter"`
}

// endpointID is the endpoint in names.
func (in subscriptionInput) endpointID() (uuid.UUID, error) {
	v := &sluice.ValidationError{}
	if in.EndpointID == nil {
		v.Add("endpoint_id", "is required")
		return uuid.Nil, v
	}
	id, err := uuid.Parse(*in.EndpointID)
	if err != nil {
		v.Add("endpoint_id", "%q is not a valid id", *in.EndpointID)
		return uuid.Nil, v
	}
	return id, nil
}

func (a *API) createSubscription(w http.ResponseWriter, r *http.Request) error {
	var in subscriptionInput
	if err := decodeJSON(w, r, &in, maxBodyBytes); err != nil {
		return err
	}
	endpointID, err := in.endpointID()
	if err != nil {
		return err
	}
	sub, err := a.ctl.CreateSubscription(r.Context(), caller(r), endpointID,
		control.SubscriptionInput{Patterns: in.EventTypes, Filter: in.Filter})
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
	page, err := a.ctl.Subscriptions(r.Context(), caller(r), endpointID, p)
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
	sub, err := a.ctl.Subscription(r.Context(), caller(r), id)
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
	if err := a.ctl.DeleteSubscription(r.Context(), caller(r), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

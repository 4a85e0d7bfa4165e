package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/endpointrules"
	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/sluice"
)

type subscriptionInput struct {
	EndpointID *string         `json:"endpoint_id"`
	EventTypes []string        `json:"event_types"`
	Filter     json.RawMessage `json:"filter"`
}

// validate checks in and returns its endpoint and its filter (nil: none,
// for an absent or null filter).
func (in subscriptionInput) validate() (uuid.UUID, *filter.Filter, error) {
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
	f := parseFilter(in.Filter, v)
	return endpointID, f, v.Err()
}

// parseFilter reads a subscription's filter (nil when absent or null),
// naming a refused one's failing place as the field: "filter.$or[1].total.$gt".
func parseFilter(raw json.RawMessage, v *sluice.ValidationError) *filter.Filter {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	f, err := filter.Parse(raw)
	var fe *filter.Error
	switch {
	case errors.As(err, &fe):
		field := "filter"
		if fe.Path != "" {
			field += "." + fe.Path
		}
		v.Add(field, "%s", fe.Msg)
		return nil
	case err != nil:
		v.Add("filter", "%s", err.Error())
		return nil
	}
	return f
}

func (a *API) createSubscription(w http.ResponseWriter, r *http.Request) error {
	var in subscriptionInput
	if err := decodeJSON(w, r, &in, maxBodyBytes); err != nil {
		return err
	}
	endpointID, f, err := in.validate()
	if err != nil {
		return err
	}
	sub, err := a.store.CreateFilteredSubscription(r.Context(), tenantFrom(r.Context()).ID, endpointID, in.EventTypes, f)
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

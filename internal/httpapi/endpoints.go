package httpapi

import (
	"net/http"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/endpointrules"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// endpointWithSecret is the create response: the only one that carries the
// secret besides GET /secret.
type endpointWithSecret struct {
	sluice.Endpoint
	Secret  string `json:"secret"`
	PollURL string `json:"poll_url,omitempty"` // a poll endpoint's only
}

type secretBody struct {
	Secret  string `json:"secret"`
	PollURL string `json:"poll_url,omitempty"` // a poll endpoint's only
}

func (a *API) createEndpoint(w http.ResponseWriter, r *http.Request) error {
	var in endpointInput
	if err := decodeJSON(w, r, &in, maxBodyBytes); err != nil {
		return err
	}
	set := sluice.EndpointSettings{MaxInFlight: sluice.DefaultMaxInFlight, Ordering: sluice.OrderingNone}
	if err := in.apply(&set, true, a.cfg.AllowPrivateTargets); err != nil {
		return err
	}
	ep, secret, err := a.store.CreateEndpoint(r.Context(), tenantFrom(r.Context()).ID, set)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, endpointWithSecret{Endpoint: ep, Secret: secret, PollURL: a.pollURL(ep, secret)})
	return nil
}

func (a *API) listEndpoints(w http.ResponseWriter, r *http.Request) error {
	v := &sluice.ValidationError{}
	p := pageParams(r, v)
	consumer := consumerParam(r, v)
	if err := v.Err(); err != nil {
		return err
	}
	page, err := a.store.ListEndpoints(r.Context(), tenantFrom(r.Context()).ID, consumer, p)
	if err != nil {
		return err
	}
	writePage(w, page)
	return nil
}

func (a *API) getEndpoint(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "endpoint")
	if err != nil {
		return err
	}
	ep, err := a.store.GetEndpoint(r.Context(), tenantFrom(r.Context()).ID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ep)
	return nil
}

func (a *API) updateEndpoint(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "endpoint")
	if err != nil {
		return err
	}
	var in endpointInput
	if err := decodeJSON(w, r, &in, maxBodyBytes); err != nil {
		return err
	}
	tenantID := tenantFrom(r.Context()).ID
	ep, err := a.store.GetEndpoint(r.Context(), tenantID, id)
	if err != nil {
		return err
	}
	set := ep.Settings()
	if err := in.apply(&set, false, a.cfg.AllowPrivateTargets); err != nil {
		return err
	}
	ep, err = a.store.UpdateEndpoint(r.Context(), tenantID, id, set, a.cfg.Nudger)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ep)
	return nil
}

func (a *API) deleteEndpoint(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "endpoint")
	if err != nil {
		return err
	}
	if err := a.ctl.DeleteEndpoint(r.Context(), caller(r), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) getEndpointSecret(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "endpoint")
	if err != nil {
		return err
	}
	secret, err := a.store.EndpointSecret(r.Context(), tenantFrom(r.Context()).ID, id)
	if err != nil {
		return err
	}
	return a.writeSecret(w, r, id, secret)
}

// writeSecret answers an endpoint's current secret, with its poll URL
// when it is a poll endpoint: the URL changes with the secret.
func (a *API) writeSecret(w http.ResponseWriter, r *http.Request, id uuid.UUID, secret string) error {
	ep, err := a.store.GetEndpoint(r.Context(), tenantFrom(r.Context()).ID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, secretBody{Secret: secret, PollURL: a.pollURL(ep, secret)})
	return nil
}

func (a *API) rotateEndpointSecret(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "endpoint")
	if err != nil {
		return err
	}
	secret, err := a.store.RotateEndpointSecret(r.Context(), tenantFrom(r.Context()).ID, id, endpointrules.SecretGrace)
	if err != nil {
		return err
	}
	a.poll.Forget(id) // its poll URL changed: at once here; other processes hear of it
	return a.writeSecret(w, r, id, secret)
}

func (a *API) closeCircuit(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "endpoint")
	if err != nil {
		return err
	}
	ep, err := dispatch.CloseCircuit(r.Context(), a.store, a.cfg.Nudger, tenantFrom(r.Context()).ID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ep)
	return nil
}

package httpapi

import (
	"net/http"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// endpointWithSecret is the create response: the only one that carries the
// secret besides GET /secret.
type endpointWithSecret struct {
	sluice.Endpoint
	Secret    string `json:"secret"`
	PollURL   string `json:"poll_url,omitempty"`   // a poll endpoint's only
	PublicKey string `json:"public_key,omitempty"` // an endpoint signing v1a's only
}

type secretBody struct {
	Secret    string `json:"secret"`
	PollURL   string `json:"poll_url,omitempty"`   // a poll endpoint's only
	PublicKey string `json:"public_key,omitempty"` // an endpoint signing v1a's only
}

func (a *API) createEndpoint(w http.ResponseWriter, r *http.Request) error {
	in, err := decodeEndpointInput(w, r)
	if err != nil {
		return err
	}
	ep, err := a.ctl.CreateEndpoint(r.Context(), caller(r), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, endpointWithSecret{Endpoint: ep.Endpoint, Secret: ep.Secret, PollURL: ep.PollURL, PublicKey: ep.PublicKey})
	return nil
}

// decodeEndpointInput reads the body of POST and PATCH /v1/endpoints.
func decodeEndpointInput(w http.ResponseWriter, r *http.Request) (control.EndpointInput, error) {
	var in endpointInput
	if err := decodeJSON(w, r, &in, maxBodyBytes); err != nil {
		return control.EndpointInput{}, err
	}
	return in.input()
}

func (a *API) listEndpoints(w http.ResponseWriter, r *http.Request) error {
	v := &sluice.ValidationError{}
	p := pageParams(r, v)
	consumer := consumerParam(r, v)
	if err := v.Err(); err != nil {
		return err
	}
	page, err := a.ctl.Endpoints(r.Context(), caller(r), consumer, p)
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
	ep, err := a.ctl.Endpoint(r.Context(), caller(r), id)
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
	in, err := decodeEndpointInput(w, r)
	if err != nil {
		return err
	}
	ep, err := a.ctl.UpdateEndpoint(r.Context(), caller(r), id, in)
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
	s, err := a.ctl.RevealEndpointSecret(r.Context(), caller(r), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, secretBody{Secret: s.Secret, PollURL: s.PollURL, PublicKey: s.PublicKey})
	return nil
}

func (a *API) rotateEndpointSecret(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "endpoint")
	if err != nil {
		return err
	}
	s, err := a.ctl.RotateEndpointSecret(r.Context(), caller(r), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, secretBody{Secret: s.Secret, PollURL: s.PollURL, PublicKey: s.PublicKey})
	return nil
}

func (a *API) testEndpoint(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "endpoint")
	if err != nil {
		return err
	}
	ev, err := a.ctl.TestEndpoint(r.Context(), caller(r), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, ev)
	return nil
}

func (a *API) closeCircuit(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "endpoint")
	if err != nil {
		return err
	}
	ep, err := a.ctl.CloseCircuit(r.Context(), caller(r), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ep)
	return nil
}

func (a *API) verifyEndpoint(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "endpoint")
	if err != nil {
		return err
	}
	ep, err := a.ctl.VerifyEndpoint(r.Context(), caller(r), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, ep)
	return nil
}

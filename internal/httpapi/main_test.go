package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
	"github.com/sluice-dev/sluice/internal/testkit/dispatchtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// contract is the OpenAPI document every response in these tests is checked
// against.
var contract routers.Router

func init() {
	openapi3.DefineStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562))
	doc, err := api.GetSpec()
	if err != nil {
		panic(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		panic(err)
	}
	// The document's servers name a deployment's address; the test server
	// listens elsewhere, so match operations on any host.
	doc.Servers = nil
	contract, err = gorillamux.NewRouter(doc)
	if err != nil {
		panic(err)
	}
}

// testBundle is one test's server, store and two tenants.
type testBundle struct {
	t       *testing.T
	srv     *httptest.Server
	handler http.Handler // the server's handler, for requests no client would send
	store   *store.Store
	jobs    *jobs.Queue
	nudger  *dispatch.Nudger
	tenantA sluice.Tenant
	keyA    string
	tenantB sluice.Tenant
	keyB    string
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	return setupWith(t, apirate.Config{Tenant: testRate})
}

// setupWith is setup with rate limits of the test's choosing (read from
// the test's store).
func setupWith(t *testing.T, limits apirate.Config) *testBundle {
	t.Helper()
	t.Parallel()
	f := storetest.New(t)
	st := f.Store
	b := &testBundle{t: t, store: st, jobs: f.Jobs, nudger: dispatchtest.Nudger(f.Store, f.Jobs), tenantA: f.TenantA, keyA: f.KeyA, tenantB: f.TenantB, keyB: f.KeyB}
	limits.Rates = st
	api := httpapi.New(controltest.New(st, controltest.Options{AllowPrivateTargets: true, Nudger: b.nudger}), httpapi.Config{Ingest: httpapi.StartIngest(t, st, b.nudger), Limits: apirate.New(limits)})
	b.handler = api.Handler()
	b.srv = httptest.NewServer(b.handler)
	t.Cleanup(b.srv.Close)
	return b
}

// response is a decoded reply.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a map.
func (r response) JSON(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &m), string(r.Body))
	return m
}

// do sends a request as the holder of key (none when empty). body is sent
// as is when it is a string, JSON-encoded otherwise. Every response is
// checked against openapi.yaml, and so is the request whenever the server
// accepted it.
func (b *testBundle) do(key, method, path string, body any) response {
	t := b.t
	t.Helper()
	var raw []byte
	switch v := body.(type) {
	case nil:
	case string:
		raw = []byte(v)
	default:
		var err error
		raw, err = json.Marshal(v)
		require.NoError(t, err)
	}
	req, err := http.NewRequest(method, b.srv.URL+path, bytes.NewReader(raw))
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	resBody, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.NotEqual(t, http.StatusInternalServerError, res.StatusCode, "%s %s answered 500: %s", method, path, resBody)
	checkContract(t, req, raw, res, resBody)
	checkRateHeaders(t, req, res)
	return response{Status: res.StatusCode, Header: res.Header, Body: resBody}
}

func checkContract(t *testing.T, req *http.Request, reqBody []byte, res *http.Response, resBody []byte) {
	t.Helper()
	req = req.Clone(context.Background())
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := contract.FindRoute(req)
	if err != nil {
		if res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusMethodNotAllowed {
			return // a route the contract rightly does not have
		}
		t.Errorf("contract: %s %s is not in openapi.yaml: %v", req.Method, req.URL.Path, err)
		return
	}
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	if res.StatusCode < 300 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Errorf("contract: accepted request %s %s does not match openapi.yaml: %v", req.Method, req.URL.Path, err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 res.StatusCode,
		Header:                 res.Header,
		Body:                   io.NopCloser(bytes.NewReader(resBody)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("contract: response %d to %s %s does not match openapi.yaml: %v\nbody: %s",
			res.StatusCode, req.Method, req.URL.Path, err, truncate(resBody))
	}
}

func truncate(b []byte) string {
	s := string(b)
	if len(s) > 500 {
		s = s[:500] + "..."
	}
	return strings.TrimSpace(s)
}

// requireProblem checks that r is a problem+json answer with this status.
func requireProblem(t *testing.T, r response, status int) map[string]any {
	t.Helper()
	require.Equal(t, status, r.Status, string(r.Body))
	require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"))
	p := r.JSON(t)
	require.EqualValues(t, status, p["status"])
	require.NotEmpty(t, p["type"])
	require.NotEmpty(t, p["title"])
	require.NotEmpty(t, p["detail"])
	return p
}

// createEndpoint makes an endpoint as the holder of key and returns its JSON.
func (b *testBundle) createEndpoint(key string, body map[string]any) map[string]any {
	b.t.Helper()
	if body == nil {
		body = map[string]any{"url": "https://example.com/hook"}
	}
	r := b.do(key, http.MethodPost, "/v1/endpoints", body)
	require.Equal(b.t, http.StatusCreated, r.Status, string(r.Body))
	return r.JSON(b.t)
}

package httpapi_test

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/httpapi"
)

// TestRoutesMatchOpenAPI walks the API's router and openapi.yaml both ways:
// every route the API serves (health, readiness and metrics included) is a
// documented operation, and every documented operation is routed. Path
// parameters must carry the same names ({id}, {uid}); a chi pattern's
// regular expression ({id:[0-9]+}) is ignored. It needs no database.
func TestRoutesMatchOpenAPI(t *testing.T) {
	t.Parallel()
	a := httpapi.New(control.New(control.Config{}), httpapi.Config{})
	r := chi.NewRouter()
	a.Mount(r)

	// "GET /v1/endpoints/{id}"; a route registered for every method
	// (r.Handle) shows up once per method, and so has to be documented for
	// each: register such routes with r.Method or r.Get instead.
	routed := map[string]bool{}
	require.NoError(t, chi.Walk(r, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		route = chiParam.ReplaceAllString(strings.TrimSuffix(route, "/*"), "{$1}")
		routed[method+" "+route] = true
		return nil
	}))
	require.NotEmpty(t, routed)

	doc, err := api.GetSpec()
	require.NoError(t, err)
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}

	var undocumented, unrouted []string
	for op := range routed {
		if !documented[op] {
			undocumented = append(undocumented, op)
		}
	}
	for op := range documented {
		if !routed[op] {
			unrouted = append(unrouted, op)
		}
	}
	slices.Sort(undocumented)
	slices.Sort(unrouted)
	require.Empty(t, undocumented, "routes the API serves that openapi.yaml does not document")
	require.Empty(t, unrouted, "operations openapi.yaml documents that the API does not route")
}

// chiParam matches a chi path parameter, with or without a regular
// expression: {id} or {id:[0-9]+}.
var chiParam = regexp.MustCompile(`\{([^}:]+)(?::[^}]*)?\}`)

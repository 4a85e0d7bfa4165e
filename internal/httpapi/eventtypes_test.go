package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

var invoiceSchema = map[string]any{
	"type":     "object",
	"required": []string{"amount"},
	"properties": map[string]any{
		"amount":   map[string]any{"type": "integer", "minimum": 0},
		"currency": map[string]any{"enum": []string{"EUR", "USD"}},
	},
}

func TestEventTypeCatalogue(t *testing.T) {
	b := setup(t)
	r := b.do(b.keyA, http.MethodPut, "/v1/event-types/invoice.paid", map[string]any{
		"description": "An invoice was paid.", "schema": invoiceSchema,
		"example": map[string]any{"amount": 4200, "currency": "EUR"},
	})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	et := r.JSON(t)
	require.Equal(t, "invoice.paid", et["name"])
	require.Equal(t, false, et["deprecated"])
	r = b.do(b.keyA, http.MethodPut, "/v1/event-types/invoice.paid", map[string]any{"description": "Paid.", "schema": invoiceSchema, "deprecated": true})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Nil(t, r.JSON(t)["example"], "PUT replaces the whole entry")
	r = b.do(b.keyA, http.MethodPut, "/v1/event-types/user.created", map[string]any{"description": "No schema."})
	require.Equal(t, http.StatusCreated, r.Status)

	require.Equal(t, []string{"user.created", "invoice.paid"}, ownTypes(t, b.do(b.keyA, http.MethodGet, "/v1/event-types", nil)))
	var want []string
	for _, op := range sluice.OperationalEventTypes() {
		want = append(want, op.Name)
	}
	want = append(want, "user.created", "invoice.paid")
	require.Equal(t, want, b.catalogue(t, 2), "pages of 2 walk Sluice's types, then the tenant's, each once")
	require.Equal(t, "Paid.", b.do(b.keyA, http.MethodGet, "/v1/event-types/invoice.paid", nil).JSON(t)["description"])

	// Another tenant's catalogue is its own.
	requireProblem(t, b.do(b.keyB, http.MethodGet, "/v1/event-types/invoice.paid", nil), http.StatusNotFound)
	requireProblem(t, b.do(b.keyB, http.MethodDelete, "/v1/event-types/invoice.paid", nil), http.StatusNotFound)
	require.Empty(t, ownTypes(t, b.do(b.keyB, http.MethodGet, "/v1/event-types", nil)))
	r = b.do(b.keyB, http.MethodPost, "/v1/events", map[string]any{"type": "invoice.paid", "payload": map[string]any{"amount": -1}})
	require.Equal(t, http.StatusAccepted, r.Status, "A's schema does not apply to B")

	requireProblem(t, b.do(b.keyA, http.MethodGet, "/v1/event-types/not..valid", nil), http.StatusNotFound)
	r = b.do(b.keyA, http.MethodDelete, "/v1/event-types/user.created", nil)
	require.Equal(t, http.StatusNoContent, r.Status)
	requireProblem(t, b.do(b.keyA, http.MethodGet, "/v1/event-types/user.created", nil), http.StatusNotFound)
}

func TestEventTypeSchemaRefusals(t *testing.T) {
	b := setup(t)
	cases := map[string]map[string]any{
		"not a schema":        {"schema": map[string]any{"type": 12}},
		"external ref":        {"schema": map[string]any{"$ref": "https://example.com/schema.json"}},
		"file ref":            {"schema": map[string]any{"$ref": "file:///etc/passwd"}},
		"example fails":       {"schema": invoiceSchema, "example": map[string]any{"amount": "12"}},
		"example not object":  {"example": []int{1}},
		"schema not object":   {"schema": "string"},
		"unknown field":       {"descripton": "typo"},
		"description too big": {"description": strings.Repeat("d", 4097)},
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			r := b.do(b.keyA, http.MethodPut, "/v1/event-types/order.created", body)
			require.Contains(t, []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, r.Status, string(r.Body))
		})
	}
	requireProblem(t, b.do(b.keyA, http.MethodGet, "/v1/event-types/order.created", nil), http.StatusNotFound)
}

func TestEventsValidatedAgainstSchema(t *testing.T) {
	b := setup(t)
	r := b.do(b.keyA, http.MethodPut, "/v1/event-types/invoice.paid", map[string]any{"schema": invoiceSchema})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))

	r = b.do(b.keyA, http.MethodPost, "/v1/events", map[string]any{"type": "invoice.paid", "payload": map[string]any{"amount": 12, "currency": "EUR"}})
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	p := requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/events", map[string]any{"type": "invoice.paid", "payload": map[string]any{"amount": -3}}), http.StatusUnprocessableEntity)
	require.Equal(t, "payload/amount", p["errors"].([]any)[0].(map[string]any)["field"])
	p = requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/events", map[string]any{"type": "invoice.paid", "payload": map[string]any{"currency": "EUR"}}), http.StatusUnprocessableEntity)
	require.Equal(t, "payload", p["errors"].([]any)[0].(map[string]any)["field"], "a missing property fails at the object")
	p = requireProblem(t, b.do(b.keyA, http.MethodPost, "/v1/events/batch", map[string]any{"events": []any{
		map[string]any{"type": "invoice.paid", "payload": map[string]any{"amount": 1}},
		map[string]any{"type": "invoice.paid", "payload": map[string]any{"amount": 1, "currency": "GBP"}},
	}}), http.StatusUnprocessableEntity)
	require.Equal(t, "events[1].payload/currency", p["errors"].([]any)[0].(map[string]any)["field"])

	r = b.do(b.keyA, http.MethodPost, "/v1/events", map[string]any{"type": "not.catalogued", "payload": map[string]any{"anything": true}})
	require.Equal(t, http.StatusAccepted, r.Status, "types outside the catalogue stay allowed")

	// Removing the schema lifts the check at once on this process.
	r = b.do(b.keyA, http.MethodPut, "/v1/event-types/invoice.paid", map[string]any{"description": "no schema now"})
	require.Equal(t, http.StatusOK, r.Status)
	r = b.do(b.keyA, http.MethodPost, "/v1/events", map[string]any{"type": "invoice.paid", "payload": map[string]any{"amount": -3}})
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
}

// ownTypes lists the names in a page of the catalogue, leaving out
// Sluice's own types, which lead its first page.
// catalogue walks GET /v1/event-types in pages of limit, returning the names.
func (b *testBundle) catalogue(t *testing.T, limit int) []string {
	t.Helper()
	var names []string
	path := fmt.Sprintf("/v1/event-types?limit=%d", limit)
	for range 20 {
		page := b.do(b.keyA, http.MethodGet, path, nil).JSON(t)
		items := page["data"].([]any)
		require.LessOrEqual(t, len(items), limit)
		for _, et := range items {
			names = append(names, et.(map[string]any)["name"].(string))
		}
		if page["next_cursor"] == nil {
			return names
		}
		path = fmt.Sprintf("/v1/event-types?limit=%d&cursor=%s", limit, url.QueryEscape(page["next_cursor"].(string)))
	}
	t.Fatal("the catalogue has no last page")
	return nil
}

func ownTypes(t *testing.T, r response) []string {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	var names []string
	sluiceTypes := 0
	for _, et := range r.JSON(t)["data"].([]any) {
		name := et.(map[string]any)["name"].(string)
		if strings.HasPrefix(name, "sluice.") {
			sluiceTypes++
			continue
		}
		names = append(names, name)
	}
	require.Equal(t, len(sluice.OperationalEventTypes()), sluiceTypes, "the operational event types lead the first page")
	return names
}

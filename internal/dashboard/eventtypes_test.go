package dashboard_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// costlySchema reaches its leaf by 2^22 paths: far over the evaluation
// budget, so it is refused when saved.
func costlySchema() string {
	var b strings.Builder
	b.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	for i := range 22 {
		fmt.Fprintf(&b, `"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, i+1, i+1)
	}
	b.WriteString(`"d22":{"type":"object"}}}`)
	return b.String()
}

// TestEventTypeForms drives the catalogue's forms over HTTP: create with
// the API's rules (every refusal a 422 on the form saying why, a schema
// over the budget included, never a 500), show with the JSON indented,
// edit, delete behind its confirmation; Sluice's own types are listed and
// shown but never changed.
func TestEventTypeForms(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	br := b.browser()
	br.login(b.keyA)
	token := br.csrf("/event-types")

	p := br.get("/event-types")
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, "No event types yet.", `id="operational-event-types"`, `href="/event-types/sluice.endpoint.disabled"`,
		`id="event-type-form"`, `<textarea id="schema"`)

	for _, tc := range []struct {
		form []string
		want string
	}{
		{[]string{"name", ""}, "Name is required."},
		{[]string{"name", "bad name!"}, "Name " + html.EscapeString(`must be at most 128 characters`)},
		{[]string{"name", "sluice.mine"}, "Name must not begin with"},
		{[]string{"name", "invoice.paid", "example", `{"amount": 12`}, "Example is not JSON: unexpected end of JSON input"},
		{[]string{"name", "invoice.paid", "example", `[1, 2]`}, "Example must be a JSON object, not an array."},
		{[]string{"name", "invoice.paid", "schema", `{"type": "nonsense"}`}, "Schema is not a valid JSON Schema"},
		{[]string{"name", "invoice.paid", "schema", costlySchema()}, "more than the budget of 1000"},
		{[]string{"name", "invoice.paid", "schema", `{"type":"object","required":["amount"]}`, "example", `{"total": 1}`}, "does not satisfy the schema"},
	} {
		p := br.post("/event-types", formOf(token, tc.form...))
		require.Equal(t, http.StatusUnprocessableEntity, p.Status, "%v: %s", tc.form, p.Body)
		requireContains(t, p, `id="form-error"`, tc.want)
		requireContains(t, p, `value="`+html.EscapeString(tc.form[1])+`"`) // the form comes back filled
	}
	_, err := b.store.GetEventType(ctx, b.tenantA.ID, "invoice.paid")
	require.ErrorIs(t, err, sluice.ErrNotFound, "nothing refused was saved")

	// Created, with a large example: the form's body bound is the API's.
	big := `{"note":"` + strings.Repeat("é", 60_000) + `","amount":4200}`
	p = br.post("/event-types", formOf(token, "name", "invoice.paid", "description", "An invoice was paid.",
		"example", big, "schema", `{"type":"object","required":["amount"]}`))
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/event-types/invoice.paid?done=created", p.Location())
	et, err := b.store.GetEventType(ctx, b.tenantA.ID, "invoice.paid")
	require.NoError(t, err)
	require.Equal(t, "An invoice was paid.", et.Description)
	require.JSONEq(t, big, string(et.Example))
	p = br.get(p.Location())
	requireContains(t, p, "Event type created.", "An invoice was paid.",
		"{\n  &#34;type&#34;: &#34;object&#34;,\n  &#34;required&#34;: [\n    &#34;amount&#34;\n  ]\n}", // indented
		`href="/event-types/invoice.paid/edit"`, `href="/events?type=invoice.paid"`)

	p = br.post("/event-types", formOf(token, "name", "invoice.paid"))
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, "The event type invoice.paid exists already")

	// Edit: the form fills back indented; a refusal keeps what was typed.
	p = br.get("/event-types/invoice.paid/edit")
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, "An invoice was paid.</textarea>", "{\n  &#34;type&#34;: &#34;object&#34;,")
	p = br.post("/event-types/invoice.paid/edit", formOf(token, "description", "Paid.", "schema", costlySchema()))
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, "more than the budget of 1000", "Paid.</textarea>", html.EscapeString(costlySchema()[:40]))
	p = br.post("/event-types/invoice.paid/edit", formOf(token, "description", "Paid.", "deprecated", "1"))
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	et, err = b.store.GetEventType(ctx, b.tenantA.ID, "invoice.paid")
	require.NoError(t, err)
	require.Equal(t, "Paid.", et.Description)
	require.True(t, et.Deprecated)
	require.Nil(t, et.Schema, "an emptied field clears it")
	requireContains(t, br.get("/event-types"), `href="/event-types/invoice.paid"`, "badge-deprecated", "Paid.")

	// Sluice's own types: shown, read-only.
	p = br.get("/event-types/sluice.endpoint.disabled")
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, `id="operational-note"`, "&#34;reason&#34;")
	require.NotContains(t, p.Body, "/event-types/sluice.endpoint.disabled/edit")
	require.Equal(t, http.StatusForbidden, br.get("/event-types/sluice.endpoint.disabled/edit").Status)
	require.Equal(t, http.StatusForbidden, br.post("/event-types/sluice.endpoint.disabled/delete", formOf(token, "confirm", "yes")).Status)

	// Delete, confirmed.
	p = br.get("/event-types/invoice.paid/delete")
	requireContains(t, p, "Delete the event type invoice.paid?", `name="confirm" value="yes"`)
	require.Equal(t, "/event-types/invoice.paid/delete", br.post("/event-types/invoice.paid/delete", formOf(token)).Location())
	p = br.post("/event-types/invoice.paid/delete", formOf(token, "confirm", "yes"))
	require.Equal(t, "/event-types?done=deleted", p.Location())
	_, err = b.store.GetEventType(ctx, b.tenantA.ID, "invoice.paid")
	require.ErrorIs(t, err, sluice.ErrNotFound)

	// Unknown, malformed and other tenants' names are not found.
	_, _, err = b.store.UpsertEventType(ctx, b.tenantB.ID, sluice.EventType{Name: "theirs.only"})
	require.NoError(t, err)
	for _, path := range []string{"/event-types/invoice.paid", "/event-types/bad%20name", "/event-types/theirs.only", "/event-types/theirs.only/edit"} {
		require.Equal(t, http.StatusNotFound, br.get(path).Status, path)
	}
}

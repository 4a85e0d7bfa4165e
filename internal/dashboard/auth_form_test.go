package dashboard_test

import (
	"context"
	"net/http"
	"regexp"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestAuthForm: the form sets the auth option from its fields, shows them
// back but never the secret, keeps the stored secret when its field is
// left empty, and clears the option when all are.
func TestAuthForm(t *testing.T) {
	b := setup(t)
	br, form := b.endpointForms()
	fields := []string{"auth.token_url", "https://auth.a.test/token", "auth.client_id", "dash-client", "auth.scope", "hooks"}

	p := br.post("/endpoints", form(fields...))
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, "auth.client_secret", "is required")
	p = br.post("/endpoints", form("auth.token_url", "ftp://auth.a.test/token", "auth.client_secret", "s3cret"))
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, "auth.token_url", "auth.client_id")
	require.NotContains(t, p.Body, "s3cret", "the secret is not shown back, even refused")

	p = br.post("/endpoints", form(append(fields, "auth.client_secret", "s3cret")...))
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	id := uuid.MustParse(regexp.MustCompile(`/endpoints/([0-9a-f-]{36})\?done=created`).FindStringSubmatch(p.Location())[1])
	requireContains(t, br.get("/endpoints/"+id.String()), "client dash-client at https://auth.a.test/token, scope hooks; the secret is set")
	edit := br.get("/endpoints/" + id.String() + "/edit")
	requireContains(t, edit, `value="https://auth.a.test/token"`, `value="dash-client"`)
	require.NotContains(t, edit.Body, "s3cret", "the secret is never shown")

	// Sent back as shown (the secret empty): the stored secret stays.
	p = br.post("/endpoints/"+id.String()+"/edit", form(fields...))
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	set, err := b.store.EndpointAuthSecretSet(context.Background(), id)
	require.NoError(t, err)
	require.True(t, set)

	p = br.post("/endpoints/"+id.String()+"/edit", form())
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	ep, err := b.store.GetEndpoint(context.Background(), b.tenantA.ID, id)
	require.NoError(t, err)
	require.Nil(t, ep.Auth)
	requireContains(t, br.get("/endpoints/"+id.String()), `<dd id="auth">none</dd>`)
}

package dashboard_test

import (
	"context"
	"net/http"
	"regexp"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// TestSignatureForm: the endpoint form's signature select sets the option
// under the API's rules, the page and the form show it back, and the
// secret page shows the public key of an endpoint that signs v1a.
func TestSignatureForm(t *testing.T) {
	b := setup(t)
	br, form := b.endpointForms()
	requireContains(t, br.get("/endpoints/new"), `<select id="signature" name="signature">`, `<option value="" selected>v1 (the default)</option>`)

	p := br.post("/endpoints", form("signature", "v2"))
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, `must be &#34;v1&#34; (HMAC-SHA256), &#34;v1a&#34; (Ed25519) or &#34;v1,v1a&#34; (both)`)

	p = br.post("/endpoints", form("signature", "v1,v1a"))
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	id := uuid.MustParse(regexp.MustCompile(`/endpoints/([0-9a-f-]{36})\?done=created`).FindStringSubmatch(p.Location())[1])
	ctx := context.Background()
	ep, err := b.store.GetEndpoint(ctx, b.tenantA.ID, id)
	require.NoError(t, err)
	require.Equal(t, "v1,v1a", *ep.Signature)
	requireContains(t, br.get("/endpoints/"+id.String()), `<dd id="signature">v1,v1a</dd>`)
	requireContains(t, br.get("/endpoints/"+id.String()+"/edit"), `<option value="v1,v1a" selected>`)

	public, err := store.Read(ctx, b.store, (*dbq.Queries).EndpointPublicKey, dbq.EndpointPublicKeyParams{TenantID: b.tenantA.ID, ID: id})
	require.NoError(t, err)
	requireContains(t, br.post("/endpoints/"+id.String()+"/secret", form()), `<code id="public-key">`+send.PublicKeyText(public)+`</code>`)

	// Back to the default: the key pair goes, and the secret page shows none.
	p = br.post("/endpoints/"+id.String()+"/edit", form())
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	ep, err = b.store.GetEndpoint(ctx, b.tenantA.ID, id)
	require.NoError(t, err)
	require.Nil(t, ep.Signature)
	requireContains(t, br.get("/endpoints/"+id.String()), `<dd id="signature">v1 (the default)</dd>`)
	require.NotContains(t, br.post("/endpoints/"+id.String()+"/secret", form()).Body, "public-key")
}

package store_test

import (
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTenantFilesStoreOnly: the store's files for a tenant's own settings
// (members, sessions, keys, catalogue, consumers, portal, tenants, audit
// log) import no domain package: what to decide is package control's,
// the store maps rows.
func TestTenantFilesStoreOnly(t *testing.T) {
	t.Parallel()
	allowed := map[string]bool{
		"github.com/sluice-dev/sluice/internal/sluice":    true,
		"github.com/sluice-dev/sluice/internal/store/dbq": true,
		"github.com/sluice-dev/sluice/internal/secretbox": true,
	}
	for _, name := range []string{"members.go", "sessions.go", "apikeys.go", "eventtypes.go", "consumers.go", "portal.go", "tenants.go", "audit.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			if strings.HasPrefix(path, "github.com/sluice-dev/sluice/") {
				require.True(t, allowed[path], "%s imports %s", name, path)
			}
		}
	}
}

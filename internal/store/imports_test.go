package store_test

import (
	"bytes"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// storeImports are the internal packages the store may import: the leaf of
// domain types, the generated statements and the secrets' box.
var storeImports = []string{
	"github.com/sluice-dev/sluice/internal/sluice",
	"github.com/sluice-dev/sluice/internal/store/dbq",
	"github.com/sluice-dev/sluice/internal/secretbox",
}

// pendingImports are the files that still import a domain package.
var pendingImports = []string{}

// TestStoreImports holds the store to storing: no non-test file imports an
// internal package but sluice, dbq and secretbox.
func TestStoreImports(t *testing.T) {
	t.Parallel()
	pkg, err := build.ImportDir(".", 0)
	require.NoError(t, err)
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			require.NoError(t, err)
			if !strings.HasPrefix(imp, "github.com/sluice-dev/sluice/") || slices.Contains(storeImports, imp) {
				continue
			}
			if slices.Contains(pendingImports, name) {
				t.Logf("%s imports %s (pending)", name, imp)
				continue
			}
			t.Errorf("%s imports %s: the store imports no internal package but sluice, dbq and secretbox", name, imp)
		}
	}
}

// maxStoreLines bounds the store's hand-written code: its non-test files,
// the generated statements of dbq apart.
const maxStoreLines = 2000

// TestStoreLines holds the store to row mapping and transactions: its
// hand-written non-test files total at most maxStoreLines lines.
func TestStoreLines(t *testing.T) {
	t.Parallel()
	pkg, err := build.ImportDir(".", 0)
	require.NoError(t, err)
	lines := 0
	for _, name := range pkg.GoFiles {
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		lines += bytes.Count(src, []byte("\n"))
	}
	t.Logf("internal/store: %d hand-written lines in %d files", lines, len(pkg.GoFiles))
	require.LessOrEqual(t, lines, maxStoreLines, "internal/store's hand-written lines")
}

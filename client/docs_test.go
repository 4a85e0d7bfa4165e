package client_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// exampleMarker opens a copy of an Example function in docs/go-client.md:
// the marker line, then a go code block holding the function as
// example_test.go has it.
var exampleMarker = regexp.MustCompile("(?m)^<!-- example: (\\w+) -->\n```go\n((?s:.*?))```\n")

// exampleSources are the Example functions of example_test.go, each as
// its source text.
func exampleSources(t *testing.T) map[string]string {
	t.Helper()
	src, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "example_test.go", src, 0)
	require.NoError(t, err)
	out := map[string]string{}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && strings.HasPrefix(fn.Name.Name, "Example") {
			out[fn.Name.Name] = string(src[fset.Position(fn.Pos()).Offset:fset.Position(fn.End()).Offset]) + "\n"
		}
	}
	return out
}

// TestDocsShowTheExamples: every Go block of docs/go-client.md is an
// Example of example_test.go, copied whole and unchanged, and every
// Example is on the page; so the page shows only code that compiles and
// that TestExample and TestExampleProblems run. When this fails, copy the
// function from example_test.go into the page (or the other way round).
func TestDocsShowTheExamples(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../docs/go-client.md")
	require.NoError(t, err)
	examples := exampleSources(t)
	require.NotEmpty(t, examples)

	shown := map[string]bool{}
	for _, m := range exampleMarker.FindAllStringSubmatch(string(page), -1) {
		name, code := m[1], m[2]
		want, ok := examples[name]
		require.True(t, ok, "docs/go-client.md shows %s, which example_test.go does not have", name)
		require.Equal(t, want, code, "docs/go-client.md's copy of %s differs from example_test.go's", name)
		shown[name] = true
	}
	for name := range examples {
		require.True(t, shown[name], "docs/go-client.md does not show %s: add it after a line <!-- example: %s -->", name, name)
	}
	require.Equal(t, len(shown), strings.Count(string(page), "```go\n"),
		"docs/go-client.md has a Go block that is not a marked Example: it would not be compiled")
}

// TestUseFromAnotherModule does what docs/go-client.md says a module of
// one's own does before Sluice is published: a replace directive to a
// clone (this tree), then go get of the client. The program is the
// package's Example as another module's main; it is built there and run
// against a real Sluice. The new module's go.sum starts from this
// module's, as the checksum database would have filled it, and its go
// commands run with the module proxy off: every module comes from the
// local cache, which this module's go mod graph fills first.
func TestUseFromAnotherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	dir := t.TempDir()
	src, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	program := strings.Replace(strings.Replace(string(src), "package client_test", "package main", 1), "func Example() {", "func main() {", 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(program), 0o600))
	sums, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sums, 0o600))

	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off", "GOFLAGS=")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s %s: %s", name, strings.Join(args, " "), out)
		return string(out)
	}
	// The new module loads the whole module graph, past this module's
	// pruned one (go.mod files of dependencies of dependencies that no
	// build here reads): fill the cache with it first, from the proxy
	// when the cache lacks them.
	graph := exec.Command("go", "mod", "graph")
	graph.Dir = root
	out, err := graph.CombinedOutput()
	require.NoError(t, err, "go mod graph: %s", out)
	// As the page says.
	run("go", "mod", "init", "example.com/shop")
	run("go", "mod", "edit", "-replace", "github.com/sluice-dev/sluice="+root)
	run("go", "get", "github.com/sluice-dev/sluice/client")
	run("go", "build", "-o", "shop", ".")

	url, key := sluiceServer(t)
	cmd := exec.Command(filepath.Join(dir, "shop"))
	cmd.Env = append(os.Environ(), "SLUICE_URL="+url, "SLUICE_API_KEY="+key)
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, exampleOutput, string(out))
}

package client_test

import (
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExample runs the package's Example against a real Sluice and checks
// what it prints, as `go test` would for an Example with an Output
// comment if it could give it a server.
func TestExample(t *testing.T) {
	url, key := sluiceServer(t)
	t.Setenv("SLUICE_URL", url)
	t.Setenv("SLUICE_API_KEY", key)

	require.Equal(t, exampleOutput, captureStdout(t, Example))
}

// exampleOutput is what Example prints.
const exampleOutput = "signing secret starts with whsec_\n" +
	"accepted order.created\n" +
	"retry answered the same event: true\n" +
	"422 Validation failed\n"

// captureStdout returns what fn writes to os.Stdout.
func captureStdout(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	stdout := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	defer func() { os.Stdout = stdout }()
	fn()
	require.NoError(t, w.Close())
	return <-done
}

// TestExampleProblems runs Example_problems against a real Sluice.
func TestExampleProblems(t *testing.T) {
	url, key := sluiceServer(t)
	t.Setenv("SLUICE_URL", url)
	t.Setenv("SLUICE_API_KEY", key)
	require.Equal(t, "type: must be at most 128 characters of letters, digits, '_' and '-' in dot-separated parts, such as \"order.created\"\n",
		captureStdout(t, Example_problems))
}

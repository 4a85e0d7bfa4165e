package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// TestPreviousReleaseRunsOnTheNewSchema holds the migration discipline of
// docs/development.md ("Changing the schema"): the previous release (the
// commit in db/previous-release), built from git, runs against a database
// this tree migrated, as its processes do during a rolling upgrade. It
// creates a tenant, serves the API and a worker, and delivers a signed
// event to a receiver. A migration that drops or renames what the previous
// release still uses fails it.
func TestPreviousReleaseRunsOnTheNewSchema(t *testing.T) {
	prev := previousRelease(t)
	dsn := pgtest.NewDatabase(t)
	env := []string{"DATABASE_URL=" + dsn}
	runBinary(t, sluiceBinary(t), env, "migrate") // this tree's schema, as an upgrade's first step

	var created struct {
		APIKey string `json:"api_key"`
	}
	out := runBinary(t, prev, env, "tenant", "create", "--name", "Acme", "--alert-email", "ops@acme.example")
	require.NoError(t, json.Unmarshal(out, &created), "tenant create printed %s", out)

	key := make([]byte, 32)
	_, _ = rand.Read(key)
	addr := freeAddr(t)
	serve := exec.Command(prev, "serve")
	serve.Env = append(os.Environ(), append(env, "SLUICE_ENCRYPTION_KEY="+base64.StdEncoding.EncodeToString(key),
		"SLUICE_ADDR="+addr, "SLUICE_ALLOW_PRIVATE_TARGETS=true")...)
	var logs syncBuffer
	serve.Stdout, serve.Stderr = &logs, &logs
	serve.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, serve.Start())
	t.Cleanup(func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		_ = serve.Wait()
		if t.Failed() {
			t.Logf("the previous release's log:\n%s", logs.String())
		}
	})
	api := func(method, path string, body any, want int) map[string]any {
		t.Helper()
		b, err := json.Marshal(body)
		require.NoError(t, err)
		req, err := http.NewRequest(method, "http://"+addr+path, bytes.NewReader(b))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+created.APIKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		require.Equal(t, want, res.StatusCode, "%s %s: %s", method, path, raw)
		var v map[string]any
		require.NoError(t, json.Unmarshal(raw, &v))
		return v
	}
	require.Eventually(t, func() bool {
		res, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, time.Minute, 50*time.Millisecond, "the previous release did not become ready:\n%s", logs.String())

	rcv := receiver.New(t)
	ep := api(http.MethodPost, "/v1/endpoints", map[string]any{"url": rcv.URL()}, http.StatusCreated)
	require.NoError(t, rcv.SetSecret(ep["secret"].(string)))
	api(http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": ep["id"], "event_types": []string{"upgrade.*"}}, http.StatusCreated)
	ev := api(http.MethodPost, "/v1/events", map[string]any{"type": "upgrade.tested", "payload": map[string]int{"n": 1}}, http.StatusAccepted)
	require.True(t, rcv.Await(time.Minute, func(reqs []receiver.Request) bool { return len(reqs) > 0 }),
		"no delivery within a minute:\n%s", logs.String())
	got := rcv.Requests()[0]
	require.Equal(t, ev["id"], got.ID)
	require.True(t, got.Verified, "signed with the endpoint's secret")
}

// previousRelease builds the commit named in db/previous-release and
// returns the binary. It skips the test when this is not a git checkout
// holding that commit (a source tarball, a shallow clone).
func previousRelease(t *testing.T) string {
	t.Helper()
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): the previous release cannot be built", err)
	}
	dir := strings.TrimSpace(string(root))
	raw, err := os.ReadFile(filepath.Join(dir, "db", "previous-release"))
	require.NoError(t, err)
	commit := ""
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			commit = line
			break
		}
	}
	require.NotEmpty(t, commit, "db/previous-release names no commit")
	if err := exec.Command("git", "-C", dir, "cat-file", "-e", commit+"^{commit}").Run(); err != nil {
		t.Skipf("commit %s is not in this checkout (a shallow clone?): the previous release cannot be built", commit)
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", dir, commit, src)
	out, err := archive.CombinedOutput()
	require.NoError(t, err, "git archive %s: %s", commit, out)
	bin := filepath.Join(t.TempDir(), "sluice-previous")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/sluice")
	build.Dir = src
	out, err = build.CombinedOutput()
	require.NoError(t, err, "build the previous release %s: %s", commit, out)
	return bin
}

// runBinary runs bin with args and env (over this process's) and returns
// its standard output.
func runBinary(t *testing.T, bin string, env []string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s %s: %s", filepath.Base(bin), strings.Join(args, " "), stderr.String())
	return out
}

// freeAddr is a loopback address with a port free just now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return fmt.Sprint(l.Addr())
}

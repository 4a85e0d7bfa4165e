package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/watch"
)

// nodeStandardWebhooks is the npm standardwebhooks version the Node
// receiver verifies with.
const nodeStandardWebhooks = "standardwebhooks@1.3.0"

// TestListenVerifiedByNodeStandardWebhooks: a receiver in Node.js
// (testdata/listen-receiver.mjs) verifies every delivery the sluice
// binary's `listen` forwards with the npm standardwebhooks library: 200
// events, posted before and while it listens, with payloads of every
// kind (escapes, non-ASCII, whitespace kept, up to 200 KiB), each
// verified once and refused never, its body the poll URL's byte for
// byte. Skipped when node or npm is missing or the npm registry cannot
// be reached.
func TestListenVerifiedByNodeStandardWebhooks(t *testing.T) {
	const events = 200
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: cannot run the Node.js receiver")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed: cannot install " + nodeStandardWebhooks)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, npm, "install", "--prefix", dir, "--no-audit", "--no-fund", "--ignore-scripts",
		nodeStandardWebhooks).CombinedOutput()
	if err != nil {
		t.Skipf("npm install %s failed (is the npm registry reachable?): %v\n%s", nodeStandardWebhooks, err, out)
	}
	script, err := os.ReadFile(filepath.Join("testdata", "listen-receiver.mjs"))
	require.NoError(t, err)
	// Beside its node_modules, where Node resolves the import.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "listen-receiver.mjs"), script, 0o600))

	bin := sluiceBinary(t)
	b := setupListen(t)
	pollURL, secret := b.pollEndpoint()

	receiver := exec.Command(node, filepath.Join(dir, "listen-receiver.mjs"))
	receiver.Env = append(os.Environ(), "SLUICE_WEBHOOK_SECRET="+secret)
	receiver.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr := &syncBuffer{}
	receiver.Stderr = stderr
	stdout, err := receiver.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, receiver.Start())
	lines, ended := &watch.List[string]{}, make(chan struct{})
	var endErr error
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines.Add(sc.Text())
		}
		endErr = receiver.Wait()
		close(ended)
	}()
	t.Cleanup(func() {
		_ = receiver.Process.Kill()
		<-ended
	})
	require.True(t, lines.Await(30*time.Second, func(l []string) bool { return len(l) > 0 }),
		"the Node receiver did not start within 30 s: %s", stderr.String())
	port, ok := strings.CutPrefix(lines.Items()[0], "listening ")
	require.True(t, ok, "the Node receiver's first line: %q", lines.Items()[0])

	payloads := make([]string, events)
	for i := range payloads {
		switch i % 5 {
		case 0:
			payloads[i] = fmt.Sprintf(`{"n":%d}`, i)
		case 1:
			payloads[i] = fmt.Sprintf(`{ "n" : %d,  "html": "<a href=\"x\">&amp;</a>", "e": "é\u00e9 ✓ 🦀", "list": [1, 2.50, null, 1e3] }`, i)
		case 2:
			payloads[i] = fmt.Sprintf("{\n\t\"n\": %d,\n\t\"nested\": {\"a\": [{\"b\": true}, {}], \"c\": \"\\\\ \\/ \\b\\f\\n\\r\\t\"}\n}", i)
		case 3:
			payloads[i] = fmt.Sprintf(`{"n": %d, "big": "%s"}`, i, strings.Repeat("abcdefgh", i*100)) // up to 160 KiB
		default:
			payloads[i] = fmt.Sprintf(`{"n":%d,"s":["line\u2028separator", -0.0, "\ud83d\ude00"]}`, i)
		}
	}
	posted := b.postBatch(payloads[:events/2])
	listener := startListen(t, bin, "--poll-url", pollURL, "--forward-to", "http://127.0.0.1:"+port+"/webhooks",
		"--secret", secret, "--cursor-file", filepath.Join(t.TempDir(), "cursor"))
	listener.awaitLines(t, events/2, 60*time.Second)
	posted = append(posted, b.postBatch(payloads[events/2:])...) // while it waits on the poll URL
	listener.awaitLines(t, events, 60*time.Second)
	_, bodies := b.polled(pollURL, events)

	require.NoError(t, listener.signal(t, syscall.SIGTERM))
	require.NoError(t, receiver.Process.Signal(syscall.SIGTERM))
	select {
	case <-ended:
		require.NoError(t, endErr, "the Node receiver: %s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("the Node receiver did not end within 30 s of SIGTERM")
	}
	got := lines.Items()
	require.Equal(t, fmt.Sprintf("done %d verified 0 refused", events), got[len(got)-1], "the Node receiver's count")
	require.Len(t, got, events+2, "listening, a line per request, done: %q", got)
	for i, line := range got[1 : events+1] {
		fields := strings.Fields(line)
		require.Len(t, fields, 3, "line %d: %q", i, line)
		require.Equal(t, "verified", fields[0], "line %d: %q", i, line)
		require.Equal(t, posted[i], fields[1], "in order, each once")
		sum := sha256.Sum256(bodies[posted[i]])
		require.Equal(t, hex.EncodeToString(sum[:]), fields[2], "the body of %s is the poll URL's, byte for byte", posted[i])
	}
}

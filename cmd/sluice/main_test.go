package main

// Tests of the sluice command line against a real database. They set
// DATABASE_URL (and other SLUICE_* variables) with t.Setenv, so none of them
// runs in parallel.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// useDatabase points the commands at a fresh migrated database and returns
// a store on it, for checking what the commands wrote.
func useDatabase(t *testing.T) *store.Store {
	t.Helper()
	dsn := pgtest.NewDatabase(t)
	t.Setenv("DATABASE_URL", dsn)
	t.Setenv("SLUICE_ENCRYPTION_KEY", "") // admin commands must not need it
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return store.New(pool, nil)
}

// runCmd runs the command line args and returns what it printed.
func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, args, &out, quiet)
	return out.String(), err
}

// decodeExact decodes one line of JSON output holding exactly the keys
// want, every value a string.
func decodeExact(t *testing.T, out string, want ...string) map[string]string {
	t.Helper()
	require.True(t, strings.HasSuffix(out, "\n"), "output ends with a newline: %q", out)
	require.Equal(t, 1, strings.Count(out, "\n"), "output is one line: %q", out)
	var got map[string]string
	require.NoError(t, json.Unmarshal([]byte(out), &got), "output is a JSON object of strings: %q", out)
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	require.ElementsMatch(t, want, keys, "output keys: %q", out)
	return got
}

func createTenant(t *testing.T, name, email string) (uuid.UUID, string) {
	t.Helper()
	out, err := runCmd(t, "tenant", "create", "--name", name, "--alert-email", email)
	require.NoError(t, err)
	got := decodeExact(t, out, "tenant_id", "api_key")
	id, err := uuid.Parse(got["tenant_id"])
	require.NoError(t, err, "tenant_id is a UUID")
	require.Equal(t, id.String(), got["tenant_id"], "tenant_id is in canonical form")
	require.True(t, apikey.WellFormed(got["api_key"]), "api_key %q is a Sluice key", got["api_key"])
	return id, got["api_key"]
}

func TestTenantCreate(t *testing.T) {
	st := useDatabase(t)
	id, key := createTenant(t, "Acme Corp", "ops@acme.example")
	require.True(t, strings.HasPrefix(key, "sk_"))

	// The printed key authenticates as the new tenant, stored as given.
	cred, err := st.AuthenticateAPIKey(context.Background(), apikey.Hash(key))
	require.NoError(t, err)
	require.Equal(t, id, cred.Tenant.ID)
	require.Equal(t, "Acme Corp", cred.Tenant.Name)
	require.Equal(t, "ops@acme.example", cred.Tenant.AlertEmail)

	// A second tenant is a different tenant with a different key.
	id2, key2 := createTenant(t, "Acme Corp", "ops@acme.example")
	require.NotEqual(t, id, id2)
	require.NotEqual(t, key, key2)
}

func TestTenantCreateInvalid(t *testing.T) {
	useDatabase(t)
	for name, args := range map[string][]string{
		"bad email":     {"--name", "Acme", "--alert-email", "not-an-email"},
		"no email":      {"--name", "Acme"},
		"no name":       {"--alert-email", "ops@acme.example"},
		"unknown flag":  {"--name", "Acme", "--alert-email", "ops@acme.example", "--colour", "red"},
		"stray --email": {"--name", "Acme", "--email", "ops@acme.example"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := runCmd(t, append([]string{"tenant", "create"}, args...)...)
			require.Error(t, err)
			require.NotContains(t, out, "api_key", "nothing is printed on failure")
		})
	}
	out, err := runCmd(t, "tenant", "create", "--name", "Acme", "--alert-email", "nope")
	require.ErrorContains(t, err, "alert-email")
	require.Empty(t, out)
}

func TestAPIKeyCreate(t *testing.T) {
	st := useDatabase(t)
	id, first := createTenant(t, "Acme", "ops@acme.example")

	out, err := runCmd(t, "apikey", "create", "--tenant", id.String())
	require.NoError(t, err)
	second := decodeExact(t, out, "api_key")["api_key"]
	require.True(t, apikey.WellFormed(second), "api_key %q is a Sluice key", second)
	require.NotEqual(t, first, second)

	// Both keys work, for the same tenant.
	for _, key := range []string{first, second} {
		cred, err := st.AuthenticateAPIKey(context.Background(), apikey.Hash(key))
		require.NoError(t, err)
		require.Equal(t, id, cred.Tenant.ID)
	}
}

func TestAPIKeyCreateInvalid(t *testing.T) {
	useDatabase(t)

	out, err := runCmd(t, "apikey", "create", "--tenant", uuid.NewString())
	require.Error(t, err, "unknown tenant")
	require.ErrorIs(t, err, sluice.ErrNotFound)
	require.Empty(t, out)

	for name, args := range map[string][]string{
		"malformed id": {"--tenant", "acme"},
		"no tenant":    {},
		"unknown flag": {"--tenant-id", uuid.NewString()},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := runCmd(t, append([]string{"apikey", "create"}, args...)...)
			require.Error(t, err)
			require.Empty(t, out)
		})
	}
}

func TestUnknownCommand(t *testing.T) {
	useDatabase(t)
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"tenant"},
		{"tenant", "delete"},
		{"apikey"},
		{"apikey", "delete"},
		{"Serve"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, err := runCmd(t, args...)
			require.Error(t, err)
			require.Contains(t, err.Error(), "usage:", "the error shows the usage")
			require.Empty(t, out)
		})
	}

	out, err := runCmd(t, "help")
	require.NoError(t, err)
	for _, cmd := range []string{"serve", "migrate", "tenant create", "apikey create"} {
		require.Contains(t, out, cmd)
	}
}

func TestMissingDatabaseURL(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	for _, args := range [][]string{
		{"migrate"},
		{"tenant", "create", "--name", "Acme", "--alert-email", "ops@acme.example"},
		{"apikey", "create", "--tenant", uuid.NewString()},
	} {
		_, err := runCmd(t, args...)
		require.ErrorContains(t, err, "DATABASE_URL", "%v", args)
	}
}

func TestMigrateIdempotent(t *testing.T) {
	// An already migrated database: migrate is a no-op, twice.
	useDatabase(t)
	for range 2 {
		_, err := runCmd(t, "migrate")
		require.NoError(t, err)
	}

	// An empty database: migrate creates the schema, then is a no-op, and
	// the admin commands work on the result.
	t.Setenv("DATABASE_URL", emptyDatabase(t))
	for range 2 {
		_, err := runCmd(t, "migrate")
		require.NoError(t, err)
	}
	createTenant(t, "Acme", "ops@acme.example")
}

// emptyDatabase creates an unmigrated database on the test server and
// returns its URL; it is dropped when the test ends.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	serverURL := pgtest.URL(t)
	name := "sluice_cmdtest_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	admin, err := pgx.Connect(ctx, serverURL)
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), serverURL)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(serverURL)
	require.NoError(t, err)
	u.Path = "/" + name
	return u.String()
}

func TestServeNeedsEncryptionKey(t *testing.T) {
	useDatabase(t)
	t.Setenv("SLUICE_ENCRYPTION_KEY", "")
	_, err := runCmd(t, "serve", "--api")
	require.ErrorContains(t, err, "SLUICE_ENCRYPTION_KEY")

	_, err = runCmd(t, "serve", "--no-such-role")
	require.Error(t, err)
}

// TestServeAPI starts `serve --api` on a free port, uses a key made by
// `tenant create` against it, and stops it by cancelling its context.
func TestServeAPI(t *testing.T) {
	useDatabase(t)
	_, key := createTenant(t, "Acme", "ops@acme.example")

	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	t.Setenv("SLUICE_ENCRYPTION_KEY", base64.StdEncoding.EncodeToString(raw))
	t.Setenv("SLUICE_ADDR", "127.0.0.1:0")
	t.Setenv("SLUICE_ALLOW_PRIVATE_TARGETS", "true")

	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve", "--api"}, io.Discard, logger) }()

	addr := logs.await(t, regexp.MustCompile(`msg="ready: listening" url=http://(\S+)`), done, "that it is listening")
	base := "http://" + addr

	get := func(path, key string) int {
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, get("/healthz", ""))
	require.Equal(t, http.StatusOK, get("/readyz", ""))
	require.Equal(t, http.StatusOK, get("/v1/endpoints", key))
	require.Equal(t, http.StatusUnauthorized, get("/v1/endpoints", ""))

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "serve shuts down cleanly when its context ends")
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30s of its context ending")
	}
}

// syncBuffer is a bytes.Buffer safe for a logger writing from other
// goroutines.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{} // closed and replaced by each write
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.written != nil {
		close(b.written)
		b.written = nil
	}
	return b.buf.Write(p)
}

// await waits until re matches what was logged, looking again after each
// write, and returns re's first group. It fails the test if done (the
// serve command's result) comes first, or 30 s pass.
func (b *syncBuffer) await(t *testing.T, re *regexp.Regexp, done <-chan error, what string) string {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		m := re.FindStringSubmatch(b.buf.String())
		if b.written == nil {
			b.written = make(chan struct{})
		}
		written := b.written
		b.mu.Unlock()
		if m != nil {
			return m[1]
		}
		select {
		case <-written:
		case err := <-done:
			t.Fatalf("serve returned before logging %s: %v\n%s", what, err, b.String())
		case <-deadline.C:
			t.Fatalf("serve did not log %s within 30s:\n%s", what, b.String())
		}
	}
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

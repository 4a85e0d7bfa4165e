package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/db"
	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// Postgres behind PgBouncer in TestThroughPgBouncer: fewer connections
// than the 9 processes' pools would open straight to it (40 each), and a
// pooler sharing a few between them.
const (
	bouncerMaxConnections = 40
	bouncerPoolSize       = 10
	bouncerWorkers        = 8
)

// TestThroughPgBouncer: 8 worker processes and an API process reach a
// Postgres with max_connections = 40 through PgBouncer in transaction
// mode, with what needs a session (LISTEN, the leases' advisory locks) on
// SLUICE_DATABASE_SESSION_URL: every event posted is delivered once, and
// Postgres never turned a connection away.
func TestThroughPgBouncer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bin := pgbouncerBinary(t)
	dir := sharedTempDir(t)
	pgPort := startPrivateCluster(t, filepath.Join(dir, "pg"))
	direct := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/sluice?sslmode=disable", pgPort)
	conn, err := pgx.Connect(ctx, strings.Replace(direct, "/sluice?", "/postgres?", 1))
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE DATABASE sluice")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	pooled := startPgBouncer(t, bin, filepath.Join(dir, "bouncer"), pgPort)

	env := map[string]string{
		"DATABASE_URL":                 pooled,
		"SLUICE_DATABASE_SESSION_URL":  direct,
		"SLUICE_ENCRYPTION_KEY":        testKey,
		"SLUICE_ALLOW_PRIVATE_TARGETS": "true",
		"SLUICE_RETRY_SCHEDULE":        "50ms,50ms",
		"SLUICE_DELIVERY_TIMEOUT":      "2s",
		"SLUICE_API_RATE":              "1000000/s",
	}
	cfg, err := config.Parse(func(k string) string { return env[k] }, true)
	require.NoError(t, err)
	migrations, err := app.OpenSessionPool(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, db.Migrate(ctx, migrations, slog.New(slog.NewTextHandler(io.Discard, nil))))
	migrations.Close()

	h := &harness{t: t, dbURL: pooled, env: env}
	h.proc = h.process(app.Roles{API: true})
	h.srv = httptest.NewServer(h.proc.Handler)
	t.Cleanup(h.srv.Close)
	h.key = apikey.New()
	h.tenant, err = h.proc.Store.CreateTenant(ctx, "Acme", "ops@acme.test", apikey.Digest(h.key))
	require.NoError(t, err)
	for range bouncerWorkers {
		h.process(app.Roles{Worker: true})
	}
	rcv := receiver.New(t)
	h.endpoint(rcv, []string{"order.*"}, nil)

	const batches, perBatch, singles = 10, 20, 20
	for range batches {
		h.postBatch("order.created", perBatch)
	}
	for i := range singles {
		h.post("order.paid", map[string]int{"i": i})
	}
	const want = batches*perBatch + singles
	require.True(t, rcv.Await(60*time.Second, func(reqs []receiver.Request) bool { return len(reqs) >= want }),
		"every event delivered through PgBouncer: %d of %d", rcv.Count(), want)
	h.settle()
	seen := map[string]int{}
	for _, r := range rcv.Requests() {
		require.True(t, r.Verified, "signed")
		seen[r.ID]++
	}
	require.Len(t, seen, want, "every event delivered")
	require.Equal(t, want, rcv.Count(), "each once")

	// What needs a session went straight to Postgres: the wake listener
	// of each of the 9 processes holds a connection of its own there, its
	// last statement its LISTEN.
	var listening int
	require.NoError(t, pgxQueryRow(ctx, direct,
		`SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN "sluice_dispatch_wake"'`, &listening))
	require.Equal(t, 1+bouncerWorkers, listening, "wake listeners on direct connections")

	log, err := os.ReadFile(filepath.Join(dir, "pg", "postgres.log"))
	require.NoError(t, err)
	require.NotContains(t, string(log), "too many clients", "Postgres refused no connection")
}

func pgxQueryRow(ctx context.Context, url, sql string, dest ...any) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.QueryRow(ctx, sql).Scan(dest...)
}

// pgbouncerBinary finds PgBouncer, installing Debian's package when it is
// missing (as scripts/proxy-drill.sh installs nginx); it skips the test,
// saying why, when that cannot be done.
func pgbouncerBinary(t *testing.T) string {
	t.Helper()
	const bin = "/usr/sbin/pgbouncer"
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: pgbouncer is not installed (apt-get install pgbouncer, as root); the PgBouncer test did not run")
	}
	out, err := exec.CommandContext(t.Context(), "apt-get", "install", "-y", "-qq", "--no-install-recommends", "pgbouncer").CombinedOutput()
	if _, serr := os.Stat(bin); err != nil || serr != nil {
		t.Skipf("SKIPPED: pgbouncer is not installed and could not be installed (apt-get install pgbouncer: %v): the PgBouncer test did not run\n%s", err, out)
	}
	return bin
}

// sharedTempDir is a temporary directory the postgres OS user can enter,
// for the cluster and PgBouncer that run as it when the test runs as root.
func sharedTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		require.NoError(t, os.Chmod(d, 0o755))
	}
	return dir
}

// startPrivateCluster starts a Postgres cluster of its own in dir with
// scripts/pg.sh, holding bouncerMaxConnections, and returns its port.
func startPrivateCluster(t *testing.T, dir string) int {
	t.Helper()
	pgsh, err := filepath.Abs(filepath.Join("..", "..", "scripts", "pg.sh"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = exec.Command("bash", pgsh, "stop", dir).Run() })
	for range 20 {
		port := freePort(t)
		cmd := exec.CommandContext(t.Context(), "bash", pgsh, "start", dir, strconv.Itoa(port))
		cmd.Env = append(os.Environ(), fmt.Sprintf("SLUICE_PG_EXTRA_CONF=max_connections = %d", bouncerMaxConnections))
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 3 {
			continue // the port was taken meanwhile
		}
		require.NoError(t, err, "pg.sh start: %s", out)
		return port
	}
	t.Fatal("no free port for the private cluster")
	return 0
}

// startPgBouncer starts PgBouncer in transaction mode in front of the
// cluster on pgPort and returns DATABASE_URL through it.
func startPgBouncer(t *testing.T, bin, dir string, pgPort int) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	port := freePort(t)
	require.NoError(t, pgtest.WritePgBouncerConfig(dir, pgPort, port, bouncerPoolSize))
	logf, err := os.Create(filepath.Join(dir, "pgbouncer.log"))
	require.NoError(t, err)
	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 { // PgBouncer refuses to run as root
		args = append([]string{"-u", "postgres"}, args...)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // PgBouncer's immediate shutdown
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = logf.Close()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	eventually(t, 10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	}, "PgBouncer listens on %s", addr)
	return "postgres://postgres@" + addr + "/sluice?sslmode=disable"
}

// freePort is a loopback port free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

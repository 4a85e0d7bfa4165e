package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a private Postgres cluster made with scripts/pg.sh, which the
// suite crashes, pauses and restarts. It is never the cluster DATABASE_URL
// points at.
type Cluster struct {
	Dir  string // pg.sh's DIR: data/, postgres.log, the socket
	Port int
	pgsh string // path of scripts/pg.sh
	bin  string // PostgreSQL server binaries
}

// StartCluster initialises and starts a cluster in dir on the first free
// port from basePort up. Every parent of dir must be traversable by the
// postgres OS user when we run as root (pg.sh says so if not).
func StartCluster(ctx context.Context, root, dir string, basePort int) (*Cluster, error) {
	c := &Cluster{Dir: dir, pgsh: filepath.Join(root, "scripts", "pg.sh")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make cluster directory: %w", err)
	}
	out, err := exec.CommandContext(ctx, "bash", c.pgsh, "bindir").Output()
	if err != nil {
		return nil, fmt.Errorf("pg.sh bindir: %w", err)
	}
	c.bin = strings.TrimSpace(string(out))
	for port := basePort; port < basePort+100; port++ {
		cmd := exec.CommandContext(ctx, "bash", c.pgsh, "start", dir, strconv.Itoa(port))
		msg, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		switch {
		case err == nil:
			c.Port = port
			return c, nil
		case errors.As(err, &exit) && exit.ExitCode() == 3:
			continue // port in use
		default:
			return nil, fmt.Errorf("pg.sh start: %w\n%s", err, msg)
		}
	}
	return nil, fmt.Errorf("no free port in %d..%d", basePort, basePort+99)
}

// URL is the connection URL of database db.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

// CreateDatabase drops and creates db.
func (c *Cluster) CreateDatabase(ctx context.Context, db string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connect to cluster: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, q := range []string{"DROP DATABASE IF EXISTS " + db + " WITH (FORCE)", "CREATE DATABASE " + db} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// asOwner runs a server binary as the cluster's owner (postgres when root).
func (c *Cluster) asOwner(ctx context.Context, name string, args ...string) *exec.Cmd {
	bin := filepath.Join(c.bin, name)
	if os.Geteuid() == 0 {
		runuser := "runuser"
		for _, p := range []string{"/usr/sbin/runuser", "/sbin/runuser"} {
			if _, err := os.Stat(p); err == nil {
				runuser = p
			}
		}
		cmd := exec.CommandContext(ctx, runuser, append([]string{"-u", "postgres", "--", bin}, args...)...)
		cmd.Dir = "/"
		return cmd
	}
	return exec.CommandContext(ctx, bin, args...)
}

// Crash stops the cluster with `pg_ctl stop -m immediate`: every backend
// dies without a checkpoint, and the next start runs crash recovery.
func (c *Cluster) Crash(ctx context.Context) error {
	out, err := c.asOwner(ctx, "pg_ctl", "stop", "-D", filepath.Join(c.Dir, "data"), "-m", "immediate", "-w", "-t", "30").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl stop -m immediate: %w\n%s", err, out)
	}
	return nil
}

// Start starts the stopped cluster again on its port (crash recovery
// included) and returns once it accepts connections.
func (c *Cluster) Start(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "bash", c.pgsh, "start", c.Dir, strconv.Itoa(c.Port)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg.sh start: %w\n%s", err, out)
	}
	return nil
}

// pids are the postmaster and its children (every backend and auxiliary
// process of the cluster).
func (c *Cluster) pids() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(c.Dir, "data", "postmaster.pid"))
	if err != nil {
		return nil, fmt.Errorf("read postmaster.pid: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pm, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return nil, fmt.Errorf("postmaster.pid: %q", line)
	}
	out := []int{pm}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces, so cut at the last ')'.
		s := string(st)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pm) {
			out = append(out, pid)
		}
	}
	return out, nil
}

// Pause sends SIGSTOP to every process of the cluster (the postmaster
// first, so it sees no child change state) and returns what it stopped.
func (c *Cluster) Pause() ([]int, error) {
	pids, err := c.pids()
	if err != nil {
		return nil, err
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	return pids, nil
}

// Resume sends SIGCONT to pids (children first, the postmaster last).
func (c *Cluster) Resume(pids []int) {
	for i := len(pids) - 1; i >= 0; i-- {
		_ = syscall.Kill(pids[i], syscall.SIGCONT)
	}
}

// Destroy stops the cluster (resuming it first if paused) and deletes its
// directory; its server log is copied to keepLog first, if given.
func (c *Cluster) Destroy(keepLog string) {
	if pids, err := c.pids(); err == nil {
		c.Resume(pids)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_ = exec.CommandContext(ctx, "bash", c.pgsh, "stop", c.Dir).Run()
	if keepLog != "" {
		if b, err := os.ReadFile(filepath.Join(c.Dir, "postgres.log")); err == nil {
			_ = os.WriteFile(keepLog, b, 0o644)
		}
	}
	_ = os.RemoveAll(c.Dir)
}

// BaseBackup makes a standby of c in dir (dir/data, as pg.sh lays it out)
// with pg_basebackup -R: it streams from c once started (StartCluster on
// dir).
func (c *Cluster) BaseBackup(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("make standby directory: %w", err)
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("look up user postgres: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return fmt.Errorf("give standby directory to postgres: %w", err)
		}
	}
	out, err := c.asOwner(ctx, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(c.Port), "-U", "postgres",
		"-D", filepath.Join(dir, "data"), "-R", "-X", "stream", "-c", "fast").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_basebackup: %w\n%s", err, out)
	}
	return nil
}

// RequireSyncStandby makes every commit on c wait for a standby to have
// it (synchronous_standby_names = '*'), and returns once a standby is
// streaming synchronously. Set after the base backup, so that the standby,
// once promoted, does not wait for a standby of its own.
func (c *Cluster) RequireSyncStandby(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connect to cluster: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, q := range []string{`ALTER SYSTEM SET synchronous_standby_names = '*'`, `SELECT pg_reload_conf()`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'`).Scan(&n); err != nil {
			return fmt.Errorf("count synchronous standbys: %w", err)
		}
		if n > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("no synchronous standby streaming after 30s")
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// Promote makes a standby the primary (pg_ctl promote) and returns once it
// takes writes.
func (c *Cluster) Promote(ctx context.Context) error {
	out, err := c.asOwner(ctx, "pg_ctl", "promote", "-D", filepath.Join(c.Dir, "data"), "-w", "-t", "60").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl promote: %w\n%s", err, out)
	}
	return nil
}

package faults

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
)

// Bouncer is a PgBouncer in transaction pooling mode in front of the
// suite's cluster, on a port of its own that it keeps across restarts.
type Bouncer struct {
	Dir  string // pgbouncer.ini, userlist.txt, pgbouncer.log
	Port int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// bouncerPoolSize is how many server connections PgBouncer opens to
// Postgres for the scenario's database: fewer than the three sluice
// processes' pools would open directly.
const bouncerPoolSize = 20

// bouncerBinary is Debian's PgBouncer (make faults installs it when
// missing: scripts/faults.sh).
const bouncerBinary = "/usr/sbin/pgbouncer"

// StartBouncer writes PgBouncer's configuration in dir and starts it in
// front of Postgres on pgPort.
func StartBouncer(dir string, pgPort int) (*Bouncer, error) {
	if _, err := os.Stat(bouncerBinary); err != nil {
		return nil, fmt.Errorf("pgbouncer not installed (apt-get install pgbouncer; make faults does): %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make pgbouncer directory: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	b := &Bouncer{Dir: dir, Port: port}
	if err := pgtest.WritePgBouncerConfig(dir, pgPort, port, bouncerPoolSize); err != nil {
		return nil, err
	}
	return b, b.Start()
}

// Start runs PgBouncer (again) and waits until it listens.
func (b *Bouncer) Start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	logf, err := os.OpenFile(filepath.Join(b.Dir, "pgbouncer.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open pgbouncer log: %w", err)
	}
	args := []string{filepath.Join(b.Dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 { // PgBouncer refuses to run as root
		args = append([]string{"-u", "postgres"}, args...)
	}
	cmd := exec.Command(bouncerBinary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start pgbouncer: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	b.cmd, b.done = cmd, done
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Port))
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-done:
			return fmt.Errorf("pgbouncer exited at start (log: %s)", filepath.Join(b.Dir, "pgbouncer.log"))
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			return nil
		}
	}
	return errors.New("pgbouncer does not listen after 10s")
}

// URL is the URL of database db through PgBouncer.
func (b *Bouncer) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", b.Port, db)
}

// Kill kills PgBouncer with SIGKILL and waits for it to exit.
func (b *Bouncer) Kill() {
	b.mu.Lock()
	cmd, done := b.cmd, b.done
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// KillBouncer kills PgBouncer with SIGKILL and starts it again after
// down: every connection through it breaks at once, and none opens until
// it is back (the outage).
func (e *Env) KillBouncer(ctx context.Context, down time.Duration) error {
	at := time.Now()
	e.Bouncer.Kill()
	_ = sleep(ctx, down)
	err := e.Bouncer.Start()
	e.record(Fault{Kind: fmt.Sprintf("kill -9 pgbouncer, started again after %s", down), At: at, End: time.Now(), Outage: true})
	return err
}

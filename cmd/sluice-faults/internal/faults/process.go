package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BuildSluice builds ./cmd/sluice of the repository at root into dir and
// returns the binary's path.
func BuildSluice(ctx context.Context, root, dir string) (string, error) {
	goBin, err := exec.LookPath("go") // go test and make put Go's own bin first on PATH
	if err != nil {
		return "", fmt.Errorf("build sluice: %w", err)
	}
	bin := filepath.Join(dir, "sluice")
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, "./cmd/sluice")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/sluice: %w\n%s", err, out)
	}
	return bin, nil
}

// RepoRoot is the nearest directory at or above the working directory that
// holds go.mod and scripts/pg.sh.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "scripts", "pg.sh")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root (go.mod + scripts/pg.sh) not found above the working directory")
		}
		dir = parent
	}
}

// Proc is one `sluice serve` role as an OS process that can be killed and
// started again; every run appends to the same log file.
type Proc struct {
	Name    string // api, worker1, ...
	LogPath string
	bin     string
	args    []string
	env     []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	runs int
	// Exits lists unexpected exits (not caused by Kill or Stop).
	Exits []string
	// expected is set while an exit we caused is under way.
	expected bool
}

// NewProc describes a process; Start runs it.
func NewProc(name, bin, logPath string, env []string, args ...string) *Proc {
	return &Proc{Name: name, bin: bin, args: args, env: env, LogPath: logPath}
}

// Start runs the process (again). Its output is appended to LogPath.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !closed(p.done) {
		return fmt.Errorf("%s is already running", p.Name)
	}
	f, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s log: %w", p.Name, err)
	}
	p.runs++
	fmt.Fprintf(f, "=== faults: start #%d of %s at %s\n", p.runs, p.Name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = f, f
	// Own process group (killed as a group), and killed by the kernel if
	// the suite dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.expected = cmd, done, false
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		if !p.expected {
			p.Exits = append(p.Exits, fmt.Sprintf("%s exited by itself at %s: %v", p.Name, time.Now().Format("15:04:05.000"), err))
		}
		p.mu.Unlock()
		fmt.Fprintf(f, "=== faults: %s exited at %s: %v\n", p.Name, time.Now().Format(time.RFC3339Nano), err)
		f.Close()
		close(done)
	}()
	return nil
}

// SetBin makes the next Start run bin (an upgrade).
func (p *Proc) SetBin(bin string) {
	p.mu.Lock()
	p.bin = bin
	p.mu.Unlock()
}

// Pid is the running process's id, or 0.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || closed(p.done) {
		return 0
	}
	return p.cmd.Process.Pid
}

// Kill sends SIGKILL to the process group and waits for the exit.
func (p *Proc) Kill() { p.signal(syscall.SIGKILL, 0) }

// Stop sends SIGTERM, then SIGKILL after grace.
func (p *Proc) Stop(grace time.Duration) { p.signal(syscall.SIGTERM, grace) }

func (p *Proc) signal(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	if p.cmd == nil || closed(p.done) {
		p.mu.Unlock()
		return
	}
	p.expected = true
	pid, done := p.cmd.Process.Pid, p.done
	p.mu.Unlock()
	_ = syscall.Kill(-pid, sig)
	if sig != syscall.SIGKILL {
		select {
		case <-done:
			return
		case <-time.After(grace):
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	<-done
}

// RSS is the resident set size of the running process in bytes (0 when it
// is not running).
func (p *Proc) RSS() int64 {
	pid := p.Pid()
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// UnexpectedExits returns the process's exits that the suite did not cause.
func (p *Proc) UnexpectedExits() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.Exits...)
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// runOnce runs the sluice binary for an admin command and returns stdout.
func runOnce(ctx context.Context, env []string, bin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("sluice %s: %w: %s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

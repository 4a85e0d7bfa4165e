package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"syscall"
	"time"
)

// launch starts sluice's processes against the prepared database: one
// `serve` serving every role when workers is 0, or else one `serve --api
// --dashboard` and that many `serve --worker`; and waits until the API is
// ready.
func (s *server) launch(ctx context.Context, workers int) error {
	env := append(slices.Clip(s.env), s.settings...)
	if workers == 0 {
		s.cmd = s.command(s.bin, env, "serve")
	} else {
		s.cmd = s.command(s.bin, env, "serve", "--api", "--dashboard")
	}
	s.done = make(chan struct{})
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start sluice serve: %w", err)
	}
	cmd, done := s.cmd, s.done
	go func() { _ = cmd.Wait(); close(done) }()
	s.workers = nil
	for range workers {
		w := s.command(s.bin, withoutDebugAddr(env), "serve", "--worker")
		if err := w.Start(); err != nil {
			return fmt.Errorf("start sluice serve --worker: %w", err)
		}
		s.workers = append(s.workers, w)
	}
	return s.waitReady(ctx, 30*time.Second)
}

// relaunch stops sluice's processes and starts them again with workers
// worker processes (see launch), against the same database, address and
// log: for a scenario that needs a number of workers of its own. It
// returns how the old processes stopped.
func (s *server) relaunch(ctx context.Context, workers int) (string, error) {
	stopped := s.halt()
	return stopped, s.launch(ctx, workers)
}

// workerCount is the number of `serve --worker` processes running beside
// the API process (0: one process serves every role).
func (s *server) workerCount() int { return len(s.workers) }

// halt stops the worker processes, then the main one (SIGTERM, SIGKILL
// after 10 s each), and returns how the main one stopped.
func (s *server) halt() string {
	for _, w := range s.workers { // first, so the API's jobs still have somewhere to go
		stopProcess(w, 10*time.Second)
	}
	s.workers = nil
	if s.cmd == nil || s.cmd.Process == nil {
		return ""
	}
	return s.terminate()
}

// stopProcess sends cmd SIGTERM and waits for it to exit, killing it after
// limit.
func stopProcess(cmd *exec.Cmd, limit time.Duration) {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return
	case <-time.After(limit):
	}
	_ = cmd.Process.Kill()
	select {
	case <-done:
	case <-time.After(limit):
		logf("sluice worker %d did not exit after SIGKILL", cmd.Process.Pid)
	}
}

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Machine describes where the benchmark ran.
type Machine struct {
	CPUs      int
	CPUModel  string
	RAM       string
	Kernel    string
	Go        string
	Postgres  string
	PGConfig  []string // "name = value" of settings that bound throughput
	GitCommit string
}

func describeMachine(ctx context.Context, db *pgx.Conn) Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), CPUModel: "unknown", RAM: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			m.RAM = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if out, err := exec.CommandContext(ctx, "go", "version").Output(); err == nil {
		m.Go = strings.TrimSpace(strings.TrimPrefix(string(out), "go version "))
	}
	if out, err := exec.CommandContext(ctx, "git", "describe", "--always", "--dirty", "--abbrev=12").Output(); err == nil {
		m.GitCommit = strings.TrimSpace(string(out))
	}
	if err := db.QueryRow(ctx, "SELECT version()").Scan(&m.Postgres); err != nil {
		m.Postgres = "unknown: " + err.Error()
	}
	for _, name := range []string{"fsync", "synchronous_commit", "wal_sync_method", "shared_buffers", "max_wal_size", "max_connections"} {
		var v string
		if err := db.QueryRow(ctx, "SHOW "+name).Scan(&v); err != nil {
			v = "? (" + err.Error() + ")"
		}
		m.PGConfig = append(m.PGConfig, name+" = "+v)
	}
	return m
}

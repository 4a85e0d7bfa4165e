package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

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
	for _, name := range []string{"fsync", "synchronous_commit", "wal_sync_method", "shared_buffers", "max_connections"} {
		var v string
		if err := db.QueryRow(ctx, "SHOW "+name).Scan(&v); err != nil {
			v = "? (" + err.Error() + ")"
		}
		m.PGConfig = append(m.PGConfig, name+" = "+v)
	}
	return m
}

// clockTick is USER_HZ, the unit of /proc CPU times on Linux.
const clockTick = 100

// cpuSnap is a reading of CPU time counters.
type cpuSnap struct {
	at            time.Time
	busy, total   uint64 // machine-wide jiffies (all CPUs)
	sluice, bench uint64 // process jiffies (user + system)
}

// cpuUse is CPU time spent over some wall time, in jiffies.
type cpuUse struct {
	wall          time.Duration
	busy, total   uint64
	sluice, bench uint64
}

func readCPU(sluicePID int) cpuSnap {
	s := cpuSnap{at: time.Now(), sluice: procJiffies(strconv.Itoa(sluicePID)), bench: procJiffies("self")}
	f, err := os.Open("/proc/stat")
	if err != nil {
		return s
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if sc.Scan() {
		fields := strings.Fields(sc.Text()) // cpu user nice system idle iowait irq softirq steal ...
		for i, f := range fields[1:] {
			v, _ := strconv.ParseUint(f, 10, 64)
			if i < 8 {
				s.total += v
				if i != 3 && i != 4 { // idle, iowait
					s.busy += v
				}
			}
		}
	}
	return s
}

// procJiffies is utime + stime of /proc/<pid>/stat.
func procJiffies(pid string) uint64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start at ")".
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	s, _ := strconv.ParseUint(f[12], 10, 64)
	return u + s
}

func (s cpuSnap) since(before cpuSnap) cpuUse {
	return cpuUse{
		wall: s.at.Sub(before.at), busy: s.busy - before.busy, total: s.total - before.total,
		sluice: s.sluice - before.sluice, bench: s.bench - before.bench,
	}
}

func (u cpuUse) add(v cpuUse) cpuUse {
	return cpuUse{wall: u.wall + v.wall, busy: u.busy + v.busy, total: u.total + v.total,
		sluice: u.sluice + v.sluice, bench: u.bench + v.bench}
}

// String gives average cores busy: sluice, the benchmark itself, the rest
// (Postgres, mostly), and idle.
func (u cpuUse) String() string {
	secs := u.wall.Seconds()
	cores := func(j uint64) float64 { return float64(j) / clockTick / secs }
	rest := max(cores(u.busy)-cores(u.sluice)-cores(u.bench), 0)
	idle := 0.0
	if u.total > 0 {
		idle = float64(runtime.NumCPU()) * float64(u.total-u.busy) / float64(u.total)
	}
	return fmt.Sprintf("sluice %.2f cores, Postgres and other %.2f, benchmark (client + receivers) %.2f, idle %.2f (of %d)",
		cores(u.sluice), rest, cores(u.bench), idle, runtime.NumCPU())
}

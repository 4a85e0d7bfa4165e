package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// clockTick is USER_HZ, the unit of /proc CPU times on Linux.
const clockTick = 100

// Procs are the processes whose CPU time is accounted separately.
type Procs struct {
	Sluice     []int // every sluice process
	Postmaster int   // 0 when Postgres runs elsewhere or could not be found
}

// findPostmaster returns the pid of the Postgres server behind db, when it
// runs on this machine: the parent of its checkpointer.
func findPostmaster(ctx context.Context, db *pgx.Conn) int {
	var pid int
	if err := db.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'").Scan(&pid); err != nil {
		return 0
	}
	f := procStat(strconv.Itoa(pid))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// cpuSnap is a reading of CPU time counters, in jiffies.
type cpuSnap struct {
	at                      time.Time
	busy, total             uint64 // machine-wide (all CPUs)
	irq, steal              uint64 // machine-wide, part of busy
	sluice, postgres, bench uint64
}

// cpuUse is CPU time spent over some wall time, in jiffies.
type cpuUse struct {
	wall                    time.Duration
	busy, total             uint64
	irq, steal              uint64
	sluice, postgres, bench uint64
	postgresKnown           bool
}

func readCPU(p Procs) cpuSnap {
	s := cpuSnap{at: time.Now(), bench: jiffies(procStat("self"), false)}
	for _, pid := range p.Sluice {
		s.sluice += jiffies(procStat(strconv.Itoa(pid)), false)
	}
	if p.Postmaster > 0 {
		s.postgres = postgresJiffies(p.Postmaster)
	}
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
				switch i {
				case 5, 6:
					s.irq += v
				case 7:
					s.steal += v
				}
			}
		}
	}
	return s
}

// postgresJiffies is the CPU time of the postmaster, its exited children
// and its live children.
func postgresJiffies(postmaster int) uint64 {
	pm := strconv.Itoa(postmaster)
	n := jiffies(procStat(pm), true)
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if f := procStat(filepath.Base(d)); len(f) > 1 && f[1] == pm {
			n += jiffies(f, false)
		}
	}
	return n
}

// procStat returns the fields of /proc/<pid>/stat after the command name:
// state, ppid, ... (so utime is index 11).
func procStat(pid string) []string {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil
	}
	i := strings.LastIndexByte(string(b), ')') // the command name may hold spaces
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// jiffies is utime + stime (+ cutime + cstime with children) of procStat
// fields.
func jiffies(f []string, children bool) uint64 {
	if len(f) < 15 {
		return 0
	}
	last := 12
	if children {
		last = 14
	}
	var n uint64
	for _, v := range f[11 : last+1] {
		x, _ := strconv.ParseUint(v, 10, 64)
		n += x
	}
	return n
}

func (s cpuSnap) since(before cpuSnap) cpuUse {
	return cpuUse{
		wall: s.at.Sub(before.at), busy: s.busy - before.busy, total: s.total - before.total,
		irq: s.irq - before.irq, steal: s.steal - before.steal,
		sluice: s.sluice - before.sluice, postgres: s.postgres - before.postgres, bench: s.bench - before.bench,
		postgresKnown: s.postgres > 0,
	}
}

func (u cpuUse) add(v cpuUse) cpuUse {
	return cpuUse{wall: u.wall + v.wall, busy: u.busy + v.busy, total: u.total + v.total,
		irq: u.irq + v.irq, steal: u.steal + v.steal,
		sluice: u.sluice + v.sluice, postgres: u.postgres + v.postgres, bench: u.bench + v.bench,
		postgresKnown: v.postgresKnown}
}

func (u cpuUse) cores(j uint64) float64 { return float64(j) / clockTick / u.wall.Seconds() }

// others is the average cores busy outside sluice, Postgres, the
// benchmark, interrupt handling (loopback networking, mostly) and steal:
// other work on the machine, which disturbs the measurement.
func (u cpuUse) others() float64 {
	return max(u.cores(u.busy-u.irq-u.steal)-u.cores(u.sluice)-u.cores(u.postgres)-u.cores(u.bench), 0)
}

// String gives average cores busy per party, and idle.
func (u cpuUse) String() string {
	idle := 0.0
	if u.total > 0 {
		idle = float64(runtime.NumCPU()) * float64(u.total-u.busy) / float64(u.total)
	}
	if !u.postgresKnown {
		return fmt.Sprintf("sluice %.2f cores, Postgres and other processes %.2f, benchmark (clients + receivers) %.2f, idle %.2f (of %d)",
			u.cores(u.sluice), u.others(), u.cores(u.bench), idle, runtime.NumCPU())
	}
	return fmt.Sprintf("sluice %.2f cores, Postgres %.2f, benchmark (clients + receivers) %.2f, kernel interrupts %.2f, "+
		"other processes %.2f, steal %.2f, idle %.2f (of %d)",
		u.cores(u.sluice), u.cores(u.postgres), u.cores(u.bench), u.cores(u.irq), u.others(), u.cores(u.steal), idle, runtime.NumCPU())
}

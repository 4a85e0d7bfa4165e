package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-dev/sluice/internal/testkit/tcpproxy"
)

// Patroni is a scenario's own Patroni cluster, made by scripts/ha.sh
// (cluster): one etcd, three nodes of Postgres in synchronous mode.
type Patroni struct {
	Dir  string // ha.sh's DIR: nodeN.yml, nodeN.pid, nodeN/data, logs
	Base int    // HA_PORT
	hash string // path of scripts/ha.sh
	// With proxies, node n's Patroni reaches etcd through etcdVia[n-1],
	// and the other nodes reach its Postgres (replication) through
	// pgVia[n-1]; sluice goes to every node directly.
	etcdVia, pgVia []*tcpproxy.Proxy
}

// patroniNodes is how many nodes ha.sh starts.
const patroniNodes = 3

// StartPatroni runs `ha.sh cluster dir` on ports from base and returns
// once a leader and a synchronous standby are up. With proxied, each
// node's links to etcd and from its replicas go through proxies of the
// suite's (Partition).
func StartPatroni(ctx context.Context, root, dir string, base int, proxied bool) (*Patroni, error) {
	p := &Patroni{Dir: dir, Base: base, hash: filepath.Join(root, "scripts", "ha.sh")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make patroni directory: %w", err)
	}
	env := append(os.Environ(), "HA_PORT="+strconv.Itoa(base))
	if proxied {
		for n := 1; n <= patroniNodes; n++ {
			etcd, err := tcpproxy.Start(fmt.Sprintf("127.0.0.1:%d", base))
			if err != nil {
				return p, fmt.Errorf("etcd proxy: %w", err)
			}
			p.etcdVia = append(p.etcdVia, etcd)
			pg, err := tcpproxy.Start(fmt.Sprintf("127.0.0.1:%d", p.pgPort(n)))
			if err != nil {
				return p, fmt.Errorf("replication proxy: %w", err)
			}
			p.pgVia = append(p.pgVia, pg)
			env = append(env, fmt.Sprintf("HA_NODE%d_ETCD=%s", n, etcd.Addr()), fmt.Sprintf("HA_NODE%d_CONNECT=%s", n, pg.Addr()))
		}
	}
	cmd := exec.CommandContext(ctx, "bash", p.hash, "cluster", dir)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		return p, fmt.Errorf("ha.sh cluster: %w\n%s", err, out)
	}
	return p, nil
}

func (p *Patroni) pgPort(n int) int   { return p.Base + 10 + n }
func (p *Patroni) restPort(n int) int { return p.Base + 20 + n }

// URL is the multi-host URL of database db, as Sluice is given it.
func (p *Patroni) URL(db string) string {
	hosts := make([]string, 0, patroniNodes)
	for n := 1; n <= patroniNodes; n++ {
		hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", p.pgPort(n)))
	}
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable&target_session_attrs=read-write", strings.Join(hosts, ","), db)
}

// Leader is the node (1..3) Patroni's DCS names leader, as the REST API
// of any live node other than skip tells it; 0 if none does.
func (p *Patroni) Leader(ctx context.Context, skip int) int {
	return p.member(ctx, skip, "leader")
}

// member is the running node (1..3) in role, as the REST API of any live
// node other than skip tells it; 0 if none is.
func (p *Patroni) member(ctx context.Context, skip int, role string) int {
	client := &http.Client{Timeout: time.Second}
	for n := 1; n <= patroniNodes; n++ {
		if n == skip {
			continue
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/cluster", p.restPort(n)), nil)
		resp, err := client.Do(req)
		if err != nil {
			continue
		}
		var c struct {
			Members []struct{ Name, Role, State string }
		}
		err = json.NewDecoder(resp.Body).Decode(&c)
		resp.Body.Close()
		if err != nil {
			continue
		}
		for _, m := range c.Members {
			if m.Role == role && m.State == "running" {
				if k, err := strconv.Atoi(strings.TrimPrefix(m.Name, "node")); err == nil {
					return k
				}
			}
		}
	}
	return 0
}

// takesWrites reports whether node n's Postgres takes writes now.
func (p *Patroni) takesWrites(ctx context.Context, n int) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.pgPort(n)))
	if err != nil {
		return false
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var ro bool
	return conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&ro) == nil && !ro
}

// KillLeader kills the leader's Patroni agent with SIGKILL and, when
// whole, its Postgres too (the postmaster and every child). It returns
// the node killed.
func (p *Patroni) KillLeader(ctx context.Context, whole bool) (int, error) {
	n := p.Leader(ctx, 0)
	if n == 0 {
		return 0, errors.New("no leader to kill")
	}
	pid, err := readPID(filepath.Join(p.Dir, fmt.Sprintf("node%d.pid", n)))
	if err != nil {
		return n, err
	}
	var pg []int
	if whole {
		// Read before the agent dies: nothing removes the file then, but
		// the agent is what would restart Postgres.
		if pg, err = (&Cluster{Dir: filepath.Join(p.Dir, fmt.Sprintf("node%d", n))}).pids(); err != nil {
			return n, err
		}
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return n, fmt.Errorf("kill patroni of node%d: %w", n, err)
	}
	for _, pid := range pg {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return n, nil
}

// AwaitNewLeader waits, until limit, for a node other than old to be
// leader and take writes; it returns that node.
func (p *Patroni) AwaitNewLeader(ctx context.Context, old int, limit time.Duration) (int, error) {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); {
		if n := p.Leader(ctx, old); n != 0 && n != old && p.takesWrites(ctx, n) {
			return n, nil
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("no new leader within %s (logs: %s)", limit, p.Dir)
}

// Switchover hands the leadership to the synchronous standby
// (patronictl switchover) and returns the new leader. The candidate is
// named: a switchover without one has the standby that takes the leader
// key first ask every other member's REST API whether it is the
// healthiest, while no server takes writes (docs/patroni.md).
func (p *Patroni) Switchover(ctx context.Context) (old, n int, err error) {
	old = p.Leader(ctx, 0)
	if old == 0 {
		return 0, 0, errors.New("no leader to switch over from")
	}
	sync := p.member(ctx, 0, "sync_standby")
	if sync == 0 {
		return old, 0, errors.New("no synchronous standby to switch over to")
	}
	cmd := exec.CommandContext(ctx, "patronictl", "-c", filepath.Join(p.Dir, fmt.Sprintf("node%d.yml", old)),
		"switchover", "--leader", fmt.Sprintf("node%d", old), "--candidate", fmt.Sprintf("node%d", sync), "--force")
	if out, err := cmd.CombinedOutput(); err != nil {
		return old, 0, fmt.Errorf("patronictl switchover: %w\n%s", err, out)
	}
	n, err = p.AwaitNewLeader(ctx, old, 60*time.Second)
	return old, n, err
}

// Partition holds every byte between node n's Patroni and etcd, and
// between its Postgres and the replicas streaming from it; sluice still
// reaches it.
func (p *Patroni) Partition(n int) error {
	if len(p.etcdVia) < n {
		return errors.New("partition: the cluster was started without proxies")
	}
	p.etcdVia[n-1].Hold()
	p.pgVia[n-1].Hold()
	return nil
}

// Heal resets the held connections of node n's proxies and lets new ones
// pass.
func (p *Patroni) Heal(n int) {
	p.etcdVia[n-1].Reset()
	p.pgVia[n-1].Reset()
}

// Destroy stops everything (ha.sh stop) and deletes the data, keeping the
// logs.
func (p *Patroni) Destroy() {
	defer func() {
		for _, x := range append(p.etcdVia, p.pgVia...) {
			x.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", p.hash, "stop", p.Dir)
	cmd.Env = append(os.Environ(), "HA_PORT="+strconv.Itoa(p.Base))
	_ = cmd.Run()
	for n := 1; n <= patroniNodes; n++ {
		_ = os.RemoveAll(filepath.Join(p.Dir, fmt.Sprintf("node%d", n)))
	}
	_ = os.RemoveAll(filepath.Join(p.Dir, "etcd"))
}

func readPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return pid, nil
}

// leaderPool is a pool on url whose connections go only to the leader: a
// primary left behind (commits waiting for a synchronous standby, none
// connected, neither promoted nor started in the last 30 s) is refused as
// internal/app refuses it (its isStranded), so that the suite's own reads
// see what the new leader has.
func leaderPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse check pool URL: %w", err)
	}
	validate := cfg.ConnConfig.ValidateConnect
	cfg.ConnConfig.ValidateConnect = func(ctx context.Context, c *pgconn.PgConn) error {
		if validate != nil {
			if err := validate(ctx, c); err != nil {
				return err
			}
		}
		res, err := c.Exec(ctx, `SELECT NOT pg_is_in_recovery()
		    AND current_setting('synchronous_standby_names') <> ''
		    AND NOT EXISTS (SELECT 1 FROM pg_stat_replication)
		    AND coalesce(pg_last_xact_replay_timestamp() < now() - make_interval(secs => 30), true)
		    AND pg_postmaster_start_time() < now() - make_interval(secs => 30)`).ReadAll()
		if err != nil {
			return fmt.Errorf("check for a synchronous standby: %w", err)
		}
		if string(res[0].Rows[0][0]) == "t" {
			return errors.New("left behind")
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open check pool: %w", err)
	}
	return pool, nil
}

// KillPatroni kills the leader's Patroni (whole: and its Postgres) and
// waits for the new leader to take writes: the outage ends then.
func (e *Env) KillPatroni(ctx context.Context, whole bool) error {
	at := time.Now()
	old, err := e.Patroni.KillLeader(ctx, whole)
	if err != nil {
		return err
	}
	n, err := e.Patroni.AwaitNewLeader(context.WithoutCancel(ctx), old, 90*time.Second)
	kind := fmt.Sprintf("kill -9 the leader's patroni (node%d), its postgres lives on; node%d leads", old, n)
	if whole {
		kind = fmt.Sprintf("kill -9 the leader node%d (patroni and postgres); node%d leads", old, n)
	}
	e.record(Fault{Kind: kind, At: at, End: time.Now(), Outage: true})
	e.DB.Reset() // the suite's reads follow the leader too
	return err
}

// PartitionPatroni cuts the leader off from etcd and from its replicas
// (sluice still reaches it) until another node leads and takes writes,
// then heals the partition.
func (e *Env) PartitionPatroni(ctx context.Context) error {
	at := time.Now()
	old := e.Patroni.Leader(ctx, 0)
	if old == 0 {
		return errors.New("no leader to cut off")
	}
	if err := e.Patroni.Partition(old); err != nil {
		return err
	}
	n, err := e.Patroni.AwaitNewLeader(context.WithoutCancel(ctx), old, 90*time.Second)
	e.record(Fault{Kind: fmt.Sprintf("node%d (leader) cut off from etcd and its replicas, sluice still reaching it; node%d leads", old, n),
		At: at, End: time.Now(), Outage: true})
	e.Patroni.Heal(old)
	e.DB.Reset()
	return err
}

// SwitchoverPatroni runs a planned switchover; the outage ends when the
// new leader takes writes.
func (e *Env) SwitchoverPatroni(ctx context.Context) error {
	at := time.Now()
	old, n, err := e.Patroni.Switchover(context.WithoutCancel(ctx))
	e.record(Fault{Kind: fmt.Sprintf("patronictl switchover node%d → node%d", old, n), At: at, End: time.Now(), Outage: true})
	e.DB.Reset()
	return err
}

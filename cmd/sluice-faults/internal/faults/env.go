package faults

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-dev/sluice/internal/testkit/tcpproxy"
)

// Workers is how many `sluice serve --worker` processes run.
const Workers = 2

// MaxInFlight is every endpoint's max_in_flight.
const MaxInFlight = 10

// Settings are the delivery settings of every sluice process: short, so
// that runs are fast.
var Settings = []string{
	"SLUICE_DELIVERY_TIMEOUT=2s",
	"SLUICE_RETRY_SCHEDULE=100ms,200ms,500ms,1s,1s,1s,2s",
	"SLUICE_ALLOW_PRIVATE_TARGETS=true",
	// The suite's senders are one tenant posting hundreds of events a
	// second: above the API's default rate limit, which is not under test.
	"SLUICE_API_RATE=100000/s",
}

// Env is one scenario's world: a fresh database on the suite's cluster,
// one API process, Workers worker processes, the receiver, and the faults
// injected so far.
type Env struct {
	Dir     string // the scenario's logs
	Cluster *Cluster
	// Proxy, with DBProxy, stands between every sluice process and the
	// cluster (the suite's own connections go direct).
	Proxy *tcpproxy.Proxy
	// Primary and Standby, with DBStandby, are the scenario's own pair of
	// clusters, the standby synchronous; sluice is given both hosts.
	Primary, Standby *Cluster
	// Patroni, with DBPatroni, is the scenario's own Patroni cluster;
	// sluice is given its three hosts.
	Patroni *Patroni
	// Bouncer, with DBBouncer, is the PgBouncer the sluice processes'
	// DATABASE_URL goes through; sessionURL, straight to Postgres, is
	// their SLUICE_DATABASE_SESSION_URL.
	Bouncer    *Bouncer
	sessionURL string
	API        *Proc
	// MoreAPIs are the API processes beside API, with envConfig.apis > 1,
	// behind Balancer (BaseURL is the balancer's then); apiURLs are each
	// API process's own base URL, API's first.
	MoreAPIs    []*Proc
	Balancer    *Balancer
	apiURLs     []string
	env         []string // every sluice process's environment
	newBin      string   // with an upgrade: the binary to upgrade to
	Workers     []*Proc
	Receiver    *Receiver
	BaseURL     string
	Keys        []string // API keys: [0] the main tenant, [1] a second one if asked for
	DB          *pgxpool.Pool
	Healthy     []string // healthy endpoint names at the receiver
	URLs        map[string]string
	EndpointIDs map[string]string // endpoint name → id
	Logf        func(format string, args ...any)
	warmUpID    string

	mu     sync.Mutex
	faults []Fault
	maxRSS int64
	stop   chan struct{}
	wg     sync.WaitGroup
}

// envConfig is what a scenario needs from its Env.
type envConfig struct {
	name    string
	healthy int
	bad     []Mode
	tenants int
	db      DBSetup
	// endpoints are the scenario's own, beside the healthy and bad ones.
	endpoints []EndpointSpec
	// settings are more SLUICE_* settings of every sluice process, after
	// (and so over) Settings.
	settings []string
	// apis is how many API processes run (default 1); more than one are
	// behind a Balancer.
	apis int
	// bin is the sluice binary the processes run (default the suite's).
	bin string
}

// DBSetup is how a scenario's sluice processes reach Postgres.
type DBSetup int

// Database setups.
const (
	// DBDirect: the suite's cluster, directly.
	DBDirect DBSetup = iota
	// DBProxy: the suite's cluster through a proxy (tcpproxy) that can
	// hold every byte, as a partition does.
	DBProxy
	// DBStandby: a primary and a synchronous streaming standby of the
	// scenario's own, both hosts in DATABASE_URL with
	// target_session_attrs=read-write.
	DBStandby
	// DBPatroni: a Patroni cluster of the scenario's own (scripts/ha.sh:
	// one etcd, three nodes, synchronous mode), its three hosts in
	// DATABASE_URL with target_session_attrs=read-write.
	DBPatroni
	// DBPatroniProxied: DBPatroni, with each node's links to etcd and
	// from its replicas through the suite's proxies (Patroni.Partition).
	DBPatroniProxied
	// DBBouncer: the suite's cluster through a PgBouncer of the
	// scenario's own in transaction pooling mode (DATABASE_URL), and
	// directly for what needs a session (SLUICE_DATABASE_SESSION_URL).
	DBBouncer
)

// newEnv sets up a scenario. On error, the caller still calls close.
func (s *Suite) newEnv(ctx context.Context, cfg envConfig, e *Env) error {
	e.Dir = filepath.Join(s.dir, cfg.name)
	e.Cluster, e.Logf, e.stop = s.cluster, s.logf, make(chan struct{})
	if err := os.MkdirAll(e.Dir, 0o755); err != nil {
		return fmt.Errorf("make scenario directory: %w", err)
	}
	db := "faults_" + strings.ReplaceAll(cfg.name, "-", "_")
	dbURL, err := s.database(ctx, cfg, db, e)
	if err != nil {
		return err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	e.BaseURL = "http://" + addr
	env := append(cleanEnv(), append([]string{
		"DATABASE_URL=" + dbURL,
		"SLUICE_ENCRYPTION_KEY=" + base64.StdEncoding.EncodeToString(key),
		"SLUICE_ADDR=" + addr,
	}, Settings...)...)
	if e.sessionURL != "" {
		env = append(env, "SLUICE_DATABASE_SESSION_URL="+e.sessionURL)
	}
	env = append(env, cfg.settings...) // the last of a name wins (exec.Cmd.Env)
	e.env = env
	bin := s.bin
	if cfg.bin != "" {
		bin = cfg.bin
	}
	if _, err := runOnce(ctx, env, bin, "migrate"); err != nil {
		return err
	}
	for i := range cfg.tenants {
		out, err := runOnce(ctx, env, bin, "tenant", "create", "--name", fmt.Sprintf("faults-%d", i), "--alert-email", "faults@example.com")
		if err != nil {
			return err
		}
		var t struct {
			APIKey string `json:"api_key"`
		}
		if err := json.Unmarshal(out, &t); err != nil || t.APIKey == "" {
			return fmt.Errorf("tenant create printed %q", out)
		}
		e.Keys = append(e.Keys, t.APIKey)
	}
	checkURL := s.cluster.URL(db)
	switch cfg.db {
	case DBStandby:
		checkURL = dbURL // whichever host is primary
	case DBPatroni, DBPatroniProxied:
		// Whichever host leads, and never one left behind.
		if e.DB, err = leaderPool(ctx, dbURL); err != nil {
			return err
		}
	}
	if e.DB == nil {
		if e.DB, err = pgxpool.New(ctx, checkURL); err != nil {
			return fmt.Errorf("open check pool: %w", err)
		}
	}

	modes := map[string]Mode{}
	for i := range cfg.healthy {
		name := fmt.Sprintf("ok%d", i)
		modes[name] = ModeOK
		e.Healthy = append(e.Healthy, name)
	}
	types := map[string][]string{}
	for _, m := range cfg.bad {
		modes[string(m)] = m
	}
	for _, ep := range cfg.endpoints {
		modes[ep.Name], types[ep.Name] = ep.Mode, ep.Types
	}
	if e.Receiver, err = StartReceiver(filepath.Join(e.Dir, "receiver.log"), modes); err != nil {
		return err
	}

	e.API = NewProc("api", bin, filepath.Join(e.Dir, "api.log"), env, "serve", "--api")
	e.apiURLs = []string{e.BaseURL}
	for i := 2; i <= cfg.apis; i++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		a := fmt.Sprintf("127.0.0.1:%d", port)
		e.MoreAPIs = append(e.MoreAPIs, NewProc(fmt.Sprintf("api%d", i), bin, filepath.Join(e.Dir, fmt.Sprintf("api%d.log", i)),
			append(append([]string(nil), env...), "SLUICE_ADDR="+a), "serve", "--api"))
		e.apiURLs = append(e.apiURLs, "http://"+a)
	}
	for i, p := range e.apis() {
		if err := p.Start(); err != nil {
			return err
		}
		if err := e.waitReadyAt(ctx, e.apiURLs[i], 30*time.Second); err != nil {
			return err
		}
	}
	if len(e.MoreAPIs) > 0 {
		if e.Balancer, err = StartBalancer(e.apiURLs); err != nil {
			return err
		}
		e.BaseURL = e.Balancer.URL()
	}
	e.URLs, e.EndpointIDs = map[string]string{}, map[string]string{}
	for name := range modes {
		e.URLs[name] = e.Receiver.URL(name)
		id, secret, err := e.createEndpoint(ctx, e.Receiver.URL(name), types[name])
		if err != nil {
			return err
		}
		e.EndpointIDs[name] = id
		if types[name] != nil { // the scenario's own: its receipts say whether they were signed
			if err := e.Receiver.SetSecret(name, secret); err != nil {
				return err
			}
		}
	}
	for i := range Workers {
		w := NewProc(fmt.Sprintf("worker%d", i+1), bin, filepath.Join(e.Dir, fmt.Sprintf("worker%d.log", i+1)), env, "serve", "--worker")
		e.Workers = append(e.Workers, w)
		if err := w.Start(); err != nil {
			return err
		}
	}
	e.wg.Go(e.watchRSS)
	return nil
}

// database creates the scenario's database db and returns the URL the
// sluice processes are given.
func (s *Suite) database(ctx context.Context, cfg envConfig, db string, e *Env) (string, error) {
	switch cfg.db {
	case DBPatroni, DBPatroniProxied:
		var err error
		// Ports above the standby pair's, in a range of their own.
		e.Patroni, err = StartPatroni(ctx, s.cfg.Root, filepath.Join(e.Dir, "patroni"), s.cfg.BasePort+300, cfg.db == DBPatroniProxied)
		if err != nil {
			return "", err
		}
		conn, err := pgx.Connect(ctx, e.Patroni.URL("postgres"))
		if err != nil {
			return "", fmt.Errorf("connect to the patroni leader: %w", err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
			return "", fmt.Errorf("create database: %w", err)
		}
		s.logf("  patroni cluster: %s", e.Patroni.URL(db))
		return e.Patroni.URL(db), nil
	case DBStandby:
		var err error
		// Ports above the suite's cluster's, in their own ranges.
		if e.Primary, err = StartCluster(ctx, s.cfg.Root, filepath.Join(s.dir, cfg.name+"-primary"), s.cfg.BasePort+100); err != nil {
			return "", fmt.Errorf("primary: %w", err)
		}
		if err := e.Primary.CreateDatabase(ctx, db); err != nil {
			return "", err
		}
		standbyDir := filepath.Join(s.dir, cfg.name+"-standby")
		if err := e.Primary.BaseBackup(ctx, standbyDir); err != nil {
			return "", err
		}
		if e.Standby, err = StartCluster(ctx, s.cfg.Root, standbyDir, s.cfg.BasePort+200); err != nil {
			return "", fmt.Errorf("standby: %w", err)
		}
		if err := e.Primary.RequireSyncStandby(ctx); err != nil {
			return "", err
		}
		s.logf("  primary on 127.0.0.1:%d, synchronous standby on 127.0.0.1:%d", e.Primary.Port, e.Standby.Port)
		return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable&target_session_attrs=read-write",
			e.Primary.Port, e.Standby.Port, db), nil
	case DBBouncer:
		if err := s.cluster.CreateDatabase(ctx, db); err != nil {
			return "", err
		}
		var err error
		if e.Bouncer, err = StartBouncer(filepath.Join(e.Dir, "pgbouncer"), s.cluster.Port); err != nil {
			return "", err
		}
		e.sessionURL = s.cluster.URL(db)
		s.logf("  pgbouncer (transaction pooling) on 127.0.0.1:%d in front of 127.0.0.1:%d", e.Bouncer.Port, s.cluster.Port)
		return e.Bouncer.URL(db), nil
	case DBProxy:
		if err := s.cluster.CreateDatabase(ctx, db); err != nil {
			return "", err
		}
		var err error
		if e.Proxy, err = tcpproxy.Start(fmt.Sprintf("127.0.0.1:%d", s.cluster.Port)); err != nil {
			return "", err
		}
		return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", e.Proxy.Addr(), db), nil
	default:
		return s.cluster.URL(db), s.cluster.CreateDatabase(ctx, db)
	}
}

// close stops every process, the receiver and the database pool.
func (e *Env) close() {
	if e.stop != nil {
		select {
		case <-e.stop:
		default:
			close(e.stop)
		}
	}
	e.wg.Wait()
	if e.Balancer != nil {
		e.Balancer.Close()
	}
	var wg sync.WaitGroup
	for _, p := range append(e.apis(), e.Workers...) {
		if p != nil {
			wg.Go(func() { p.Stop(10 * time.Second) })
		}
	}
	wg.Wait()
	if e.Receiver != nil {
		e.Receiver.Close()
	}
	if e.DB != nil {
		e.DB.Close()
	}
	if e.Proxy != nil {
		e.Proxy.Close()
	}
	if e.Patroni != nil {
		e.Patroni.Destroy()
	}
	if e.Bouncer != nil {
		e.Bouncer.Kill()
	}
	for name, c := range map[string]*Cluster{"primary": e.Primary, "standby": e.Standby} {
		if c != nil {
			c.Destroy(filepath.Join(e.Dir, name+"-postgres.log"))
		}
	}
}

func (e *Env) watchRSS() {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		for _, w := range e.Workers {
			if rss := w.RSS(); rss > 0 {
				e.mu.Lock()
				e.maxRSS = max(e.maxRSS, rss)
				e.mu.Unlock()
			}
		}
	}
}

// Faults returns the faults injected so far.
func (e *Env) Faults() []Fault {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Fault(nil), e.faults...)
}

func (e *Env) record(f Fault) {
	e.mu.Lock()
	e.faults = append(e.faults, f)
	e.mu.Unlock()
	e.Logf("  %s at %s, over after %s", f.Kind, f.At.Format("15:04:05.000"), f.End.Sub(f.At).Round(time.Millisecond))
}

// KillWorker kills worker i with SIGKILL and starts it again after down.
func (e *Env) KillWorker(ctx context.Context, i int, down time.Duration) error {
	w := e.Workers[i]
	at := time.Now()
	w.Kill()
	sleep(ctx, down)
	err := w.Start()
	e.record(Fault{Kind: "kill -9 " + w.Name, At: at, End: time.Now()})
	return err
}

// KillAPI kills the API process with SIGKILL and starts it again after
// down; it is over when /readyz answers 200.
func (e *Env) KillAPI(ctx context.Context, down time.Duration) error {
	at := time.Now()
	e.API.Kill()
	sleep(ctx, down)
	if err := e.API.Start(); err != nil {
		return err
	}
	err := e.waitReady(ctx, 30*time.Second)
	e.record(Fault{Kind: "kill -9 api", At: at, End: time.Now()})
	return err
}

// CrashPG stops Postgres with -m immediate and starts it after down.
func (e *Env) CrashPG(ctx context.Context, down time.Duration) error {
	at := time.Now()
	if err := e.Cluster.Crash(ctx); err != nil {
		return err
	}
	sleep(ctx, down)
	err := e.Cluster.Start(context.WithoutCancel(ctx))
	e.record(Fault{Kind: "postgres stop -m immediate", At: at, End: time.Now(), Outage: true})
	return err
}

// PausePG stops every process of the cluster with SIGSTOP for d.
func (e *Env) PausePG(ctx context.Context, d time.Duration) error {
	at := time.Now()
	pids, err := e.Cluster.Pause()
	if err != nil {
		return err
	}
	sleep(ctx, d)
	e.Cluster.Resume(pids)
	e.record(Fault{Kind: fmt.Sprintf("SIGSTOP postgres (%d processes)", len(pids)), At: at, End: time.Now(), Outage: true})
	return nil
}

// HoldDB holds every byte between sluice and Postgres for d (at the
// proxy), then resets the held connections (reset) or lets them go on.
func (e *Env) HoldDB(ctx context.Context, d time.Duration, reset bool) error {
	at := time.Now()
	e.Proxy.Hold()
	err := sleep(ctx, d)
	kind := fmt.Sprintf("every byte to postgres held %s, then let go on", d)
	if reset {
		e.Proxy.Reset()
		kind = fmt.Sprintf("every byte to postgres held %s, then the connections reset", d)
	} else {
		e.Proxy.Release()
	}
	e.record(Fault{Kind: kind, At: at, End: time.Now(), Outage: true})
	return err
}

// Failover stops the primary with -m immediate and promotes the standby
// after down; it is over when the standby takes writes.
func (e *Env) Failover(ctx context.Context, down time.Duration) error {
	at := time.Now()
	if err := e.Primary.Crash(ctx); err != nil {
		return err
	}
	_ = sleep(ctx, down)
	err := e.Standby.Promote(context.WithoutCancel(ctx))
	e.record(Fault{Kind: fmt.Sprintf("primary stop -m immediate, standby promoted after %s", down), At: at, End: time.Now(), Outage: true})
	return err
}

func (e *Env) maxWorkerRSS() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.maxRSS
}

func (e *Env) waitReady(ctx context.Context, limit time.Duration) error {
	return e.waitReadyAt(ctx, e.BaseURL, limit)
}

// waitReadyAt waits until the API at base answers /readyz with 200.
func (e *Env) waitReadyAt(ctx context.Context, base string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	client := &http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		if resp, err := client.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("api not ready after %s (log: %s)", limit, e.API.LogPath)
}

// createEndpoint registers url for the main tenant, subscribes it to
// types (default *) and returns its id and signing secret.
func (e *Env) createEndpoint(ctx context.Context, url string, types []string) (id, secret string, err error) {
	var ep struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	if err := e.call(ctx, "/v1/endpoints", map[string]any{"url": url, "max_in_flight": MaxInFlight}, &ep); err != nil {
		return "", "", err
	}
	if types == nil {
		types = []string{"*"}
	}
	return ep.ID, ep.Secret, e.call(ctx, "/v1/subscriptions", map[string]any{"endpoint_id": ep.ID, "event_types": types}, nil)
}

// CloseCircuit closes endpoint name's circuit by hand (a no-op for a
// closed one).
func (e *Env) CloseCircuit(ctx context.Context, name string) error {
	return e.callStatus(ctx, "/v1/endpoints/"+e.EndpointIDs[name]+"/circuit/close", nil, http.StatusOK, nil)
}

func (e *Env) call(ctx context.Context, path string, body, out any) error {
	return e.callStatus(ctx, path, body, http.StatusCreated, out)
}

// callStatus POSTs body to path as the main tenant and requires status.
func (e *Env) callStatus(ctx context.Context, path string, body any, status int, out any) error {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.BaseURL+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+e.Keys[0])
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		return fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, msg)
	}
	if out != nil {
		if err := json.Unmarshal(msg, out); err != nil {
			return fmt.Errorf("decode POST %s response: %w", path, err)
		}
	}
	return nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err() //nolint:wrapcheck // a context-aware wait ends with the context's own error, as ctx.Err() does
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// cleanEnv is this process's environment without DATABASE_URL and
// SLUICE_*, so only the suite's settings reach sluice.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			out = append(out, kv)
		}
	}
	return out
}

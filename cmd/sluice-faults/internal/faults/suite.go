// Package faults is Sluice's fault suite: it runs `sluice serve --api` and
// two `sluice serve --worker` processes against a private Postgres cluster,
// posts bursts of events to them while it kills processes, crashes or
// pauses Postgres, or points endpoints at misbehaving receivers, and then
// reconciles what the receiver got with what the API accepted and with the
// database. cmd/sluice-faults runs it (`make faults`); faults_test.go runs
// a short form in `make test`.
package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Config sets up a Suite.
type Config struct {
	Root string // repository root (default: found from the working directory)
	// Src is the tree whose ./cmd/sluice is built (default Root), e.g. a
	// `git archive` of a commit.
	Src string
	// UpgradeFrom is the tree whose ./cmd/sluice the rolling-upgrade
	// scenario starts on before upgrading to Src's (default Src: the same
	// commit built twice), e.g. a `git archive` of the previous release.
	UpgradeFrom string
	BasePort    int // first port tried for the cluster (default 57432)
	// SettleLimit is how long to wait, after the load and the last fault,
	// for every accepted event to arrive (default 120s).
	SettleLimit time.Duration
	Logf        func(format string, args ...any) // progress (default: none)
}

// Suite is a built sluice binary and a private Postgres cluster, shared by
// the scenarios it runs one after another (each in its own database).
type Suite struct {
	cfg     Config
	dir     string
	bin     string
	oldBin  string // the rolling upgrade's previous binary, once built
	cluster *Cluster
	logf    func(format string, args ...any)
}

// NewSuite builds sluice and starts the cluster, in a new temporary
// directory. Close removes everything again.
func NewSuite(ctx context.Context, cfg Config) (s *Suite, err error) {
	if cfg.Root == "" {
		if cfg.Root, err = RepoRoot(); err != nil {
			return nil, err
		}
	}
	if cfg.Src == "" {
		cfg.Src = cfg.Root
	}
	if cfg.BasePort == 0 {
		cfg.BasePort = 57432
	}
	if cfg.SettleLimit == 0 {
		cfg.SettleLimit = 120 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	dir, err := os.MkdirTemp("", "sluice-faults-")
	if err != nil {
		return nil, fmt.Errorf("make suite directory: %w", err)
	}
	// The cluster runs as the postgres user when we are root: it must
	// reach its directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open suite directory to postgres: %w", err)
	}
	s = &Suite{cfg: cfg, dir: dir, logf: cfg.Logf}
	defer func() {
		if err != nil {
			s.Close(false)
		}
	}()
	s.logf("building ./cmd/sluice in %s", cfg.Src)
	if s.bin, err = BuildSluice(ctx, cfg.Src, dir); err != nil {
		return s, err
	}
	s.logf("starting a private Postgres cluster in %s", filepath.Join(dir, "pg"))
	if s.cluster, err = StartCluster(ctx, cfg.Root, filepath.Join(dir, "pg"), cfg.BasePort); err != nil {
		return s, err
	}
	s.logf("cluster on 127.0.0.1:%d", s.cluster.Port)
	return s, nil
}

// previousBinary builds ./cmd/sluice of cfg.UpgradeFrom (default Src)
// into its own directory, once.
func (s *Suite) previousBinary(ctx context.Context) (string, error) {
	if s.oldBin != "" {
		return s.oldBin, nil
	}
	from := s.cfg.UpgradeFrom
	if from == "" {
		from = s.cfg.Src
	}
	dir := filepath.Join(s.dir, "previous")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("make previous binary's directory: %w", err)
	}
	s.logf("building the previous binary, ./cmd/sluice in %s", from)
	bin, err := BuildSluice(ctx, from, dir)
	if err != nil {
		return "", fmt.Errorf("previous binary: %w", err)
	}
	s.oldBin = bin
	return bin, nil
}

// Dir is the suite's directory: each scenario's logs are in Dir/<name>.
func (s *Suite) Dir() string { return s.dir }

// Close destroys the cluster and deletes the directory, except the
// scenarios' logs when keepLogs is set.
func (s *Suite) Close(keepLogs bool) {
	if s.cluster != nil {
		keep := ""
		if keepLogs {
			keep = filepath.Join(s.dir, "postgres.log")
		}
		s.cluster.Destroy(keep)
	}
	if !keepLogs {
		_ = os.RemoveAll(s.dir)
		return
	}
	_ = os.Remove(filepath.Join(s.dir, "sluice"))
}

// Run runs one scenario and returns its result; err is for failures of the
// suite itself (setup), not of Sluice.
func (s *Suite) Run(ctx context.Context, sc Scenario) (res Result, err error) {
	if sc.FIFO {
		return s.runFIFO(ctx, sc)
	}
	if sc.Own != nil {
		return sc.Own(ctx, s, sc)
	}
	start := time.Now()
	s.logf("scenario %s: %s", sc.Name, sc.Title)
	res = Result{Name: sc.Name, Title: sc.Title, Dir: filepath.Join(s.dir, sc.Name)}
	e := &Env{}
	defer e.close()
	tenants := 1
	if sc.Poison > 0 {
		tenants = 2
	}
	ecfg := envConfig{name: sc.Name, healthy: sc.Healthy, bad: sc.Bad, tenants: tenants, db: sc.DB,
		endpoints: sc.Endpoints, settings: sc.Settings, apis: sc.APIs}
	if sc.Upgrade {
		if ecfg.bin, err = s.previousBinary(ctx); err != nil {
			return res, fmt.Errorf("%s: %w", sc.Name, err)
		}
		e.newBin = s.bin
	}
	if err := s.newEnv(ctx, ecfg, e); err != nil {
		return res, fmt.Errorf("%s: setup: %w", sc.Name, err)
	}
	if err := warmUp(ctx, e); err != nil {
		return res, fmt.Errorf("%s: warm-up: %w", sc.Name, err)
	}
	sampler, err := StartSampler(e.DB, filepath.Join(e.Dir, "db-samples.log"), 500*time.Millisecond)
	if err != nil {
		return res, err
	}
	defer func() {
		if sum := sampler.Stop(); sum != "" {
			res.Notes = append(res.Notes, "river: "+sum)
		}
	}()

	// Load and faults at once; both bounded in count and time.
	burst := time.Duration(float64(sc.Events) / sc.Rate * float64(time.Second))
	loadCtx, cancelLoad := context.WithTimeout(ctx, 3*burst+120*time.Second)
	defer cancelLoad()
	var (
		wg                  sync.WaitGroup
		posts, poison       []Post
		injectErr           error
		loadStart, loadDone time.Time
	)
	loadStart = time.Now()
	wg.Go(func() {
		posts = Load{BaseURL: e.BaseURL, APIKey: e.Keys[0], Count: sc.Events, Clients: sc.Clients, Rate: sc.Rate,
			Timeout: 15 * time.Second, RetryFor: 60 * time.Second,
			Request: func(seq int) ([]byte, map[string]string, bool) { return eventBody("faults.burst", seq), nil, false },
		}.Run(loadCtx)
		loadDone = time.Now()
	})
	if sc.Poison > 0 {
		wg.Go(func() {
			poison = Load{BaseURL: e.BaseURL, APIKey: e.Keys[1], Count: sc.Poison, Clients: 4, Rate: sc.Rate / 5,
				Timeout: 15 * time.Second, Request: poisonRequest}.Run(loadCtx)
		})
	}
	if sc.Inject != nil {
		wg.Go(func() { injectErr = sc.Inject(loadCtx, e, burst) })
	}
	wg.Wait()
	if injectErr != nil {
		res.Notes = append(res.Notes, "fault injection failed: "+injectErr.Error())
	}
	s.logf("  load done in %s; waiting for every accepted event to arrive", loadDone.Sub(loadStart).Round(time.Millisecond))

	// Settle: every accepted event at every healthy endpoint, or the limit.
	ids, from := settling(e, posts, loadDone)
	deadline := from.Add(s.cfg.SettleLimit)
	for e.Receiver.Missing(e.Healthy, ids) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		_ = sleep(ctx, 250*time.Millisecond)
	}
	end := time.Now()
	var ops OpFigures
	if sc.OpEvents {
		ops.Outstanding = e.awaitDrained(ctx, sc.Endpoints, time.Now().Add(s.cfg.SettleLimit))
		ops.Drain = time.Since(end)
	}

	// The database: let the healthy endpoints' queues drain (a delivery
	// received but not recorded is sent again), then look for anything
	// nothing will ever send.
	var healthyURLs []string
	for _, h := range e.Healthy {
		healthyURLs = append(healthyURLs, e.URLs[h])
	}
	res.DB, res.Notes = awaitDrained(ctx, e.DB, healthyURLs, 15*time.Second, res.Notes)

	var receipts []Receipt
	for _, r := range e.Receiver.Receipts() {
		if r.ID != e.warmUpID {
			receipts = append(receipts, r)
		}
	}
	res.Figures = Reconcile(posts, receipts, e.Healthy, e.Faults(), end, from)
	if sc.OpEvents {
		f, err := ReconcileOps(ctx, e, sc.Endpoints, ids)
		f.Drain, f.Outstanding = ops.Drain, ops.Outstanding
		if err != nil {
			res.Notes = append(res.Notes, "operational events: "+err.Error())
		} else {
			res.Ops = &f
		}
	}
	res.Faults = e.Faults()
	res.MaxRSS = e.maxWorkerRSS()
	for _, p := range poison {
		if !p.Sent.IsZero() {
			if res.PoisonStatuses == nil {
				res.PoisonStatuses, res.PoisonByKind = map[string]int{}, map[string]map[string]int{}
			}
			res.PoisonStatuses[p.StatusKey()]++
			kind := poisonKinds[p.Seq%len(poisonKinds)]
			if res.PoisonByKind[kind] == nil {
				res.PoisonByKind[kind] = map[string]int{}
			}
			res.PoisonByKind[kind][p.StatusKey()]++
		}
	}
	for _, p := range append(e.apis(), e.Workers...) {
		res.Notes = append(res.Notes, p.UnexpectedExits()...)
		res.exits += len(p.UnexpectedExits())
	}
	res.Checks = sc.check(res)
	res.Pass = true
	for _, c := range res.Checks {
		res.Pass = res.Pass && c.Pass
	}
	res.Wall = time.Since(start)
	return res, nil
}

// warmUp posts one event and waits until every healthy endpoint has it, so
// that a scenario starts with workers that are up and delivering.
func warmUp(ctx context.Context, e *Env) error {
	posts := Load{BaseURL: e.BaseURL, APIKey: e.Keys[0], Count: 1, Clients: 1,
		Request: func(int) ([]byte, map[string]string, bool) { return eventBody("faults.warmup", -1), nil, false },
	}.Run(ctx)
	if !posts[0].Accepted() {
		return fmt.Errorf("warm-up post answered %s %s", posts[0].StatusKey(), posts[0].Err)
	}
	e.warmUpID = posts[0].EventID
	for deadline := time.Now().Add(30 * time.Second); e.Receiver.Missing(e.Healthy, []string{posts[0].EventID}) > 0; {
		if time.Now().After(deadline) {
			return fmt.Errorf("warm-up event not delivered within 30s (logs: %s)", e.Dir)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// settling returns the ids of the accepted posts and when the settle
// starts: at the end of the load or of the last fault, whichever is later.
func settling(e *Env, posts []Post, loadDone time.Time) ([]string, time.Time) {
	var ids []string
	for _, p := range posts {
		if p.Accepted() && p.EventID != "" {
			ids = append(ids, p.EventID)
		}
	}
	from := loadDone
	for _, f := range e.Faults() {
		from = maxTime(from, f.End)
	}
	return ids, from
}

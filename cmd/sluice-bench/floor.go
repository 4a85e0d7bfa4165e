package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The floor: what the least work a webhook post can take costs at a
// trickle, read beside the idle scenario's 25 events/s. A process of this
// benchmark's own binary (started with floorAddrEnv set) answers each
// POST by inserting its body into a table of its own with a synchronous
// commit and answering 202, then posts the body to a receiver and marks
// the row sent with an asynchronous commit: one request in, one durable
// statement, one request out, one more statement. Nothing else: no
// authentication, routing, signing, rate limit, retry or queue.

const (
	floorAddrEnv   = "SLUICE_BENCH_FLOOR_ADDR"   // where the floor listens
	floorTargetEnv = "SLUICE_BENCH_FLOOR_TARGET" // the receiver it posts to
	floorDBEnv     = "SLUICE_BENCH_FLOOR_DB"     // its Postgres
)

// floorTable is the floor's table, in the benchmark's database.
const floorTable = "bench_floor"

// floorMain runs the floor process until it is killed.
func floorMain() error {
	ctx := context.Background()
	durable, err := pgxpool.New(ctx, os.Getenv(floorDBEnv))
	if err != nil {
		return fmt.Errorf("connect to the database: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(os.Getenv(floorDBEnv))
	if err != nil {
		return fmt.Errorf("parse the database URL: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	async, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect to the database (synchronous_commit off): %w", err)
	}
	target := os.Getenv(floorTargetEnv)
	client := &http.Client{Timeout: 10 * time.Second}
	send := func(id string, body []byte) {
		resp, err := client.Post(target, "application/json", bytes.NewReader(body))
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		_, _ = async.Exec(ctx, `UPDATE `+floorTable+` SET sent_at = now() WHERE id = $1`, id)
	}
	handle := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id := rand.Text()
		if _, err := durable.Exec(r.Context(), `INSERT INTO `+floorTable+` (id, body) VALUES ($1, $2)`, id, body); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		go send(id, body)
	}
	if err := http.ListenAndServe(os.Getenv(floorAddrEnv), http.HandlerFunc(handle)); err != nil {
		return fmt.Errorf("serve on %s: %w", os.Getenv(floorAddrEnv), err)
	}
	return nil
}

// floorProc is a running floor process, the receiver it posts to and its
// table.
type floorProc struct {
	url  string    // where it takes posts
	cmd  *exec.Cmd // the process
	recv *http.Server
	db   *pgx.Conn
	got  atomic.Int64 // posts its receiver has had
	last atomic.Int64 // when the latest arrived, Unix ns
}

// startFloorProc makes the floor's table, starts its receiver and its
// process, and waits until it answers.
func startFloorProc(ctx context.Context, env *Env) (*floorProc, error) {
	f := &floorProc{db: env.DB}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the floor's posts: %w", err)
	}
	f.recv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		f.last.Store(time.Now().UnixNano())
		f.got.Add(1)
	})}
	go func() { _ = f.recv.Serve(ln) }()
	if _, err := env.DB.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+floorTable+
		` (id text PRIMARY KEY, body jsonb NOT NULL, sent_at timestamptz)`); err != nil {
		f.Close(ctx)
		return nil, fmt.Errorf("create %s: %w", floorTable, err)
	}
	addr, cmd, err := startFloor(env.DB.Config(), "http://"+ln.Addr().String()+"/")
	if err != nil {
		f.Close(ctx)
		return nil, err
	}
	f.url, f.cmd = "http://"+addr+"/", cmd
	return f, nil
}

// procs is env's processes with the floor's in place of Sluice's.
func (f *floorProc) procs(env *Env) Procs {
	return Procs{Sluice: []int{f.cmd.Process.Pid}, Postmaster: env.Procs.Postmaster}
}

// await waits, for at most limit, until the receiver has had n posts, and
// says when the last of them arrived (zero if they did not all arrive).
func (f *floorProc) await(n int, limit time.Duration) time.Time {
	for deadline := time.Now().Add(limit); f.got.Load() < int64(n); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			return time.Time{}
		}
	}
	return time.Unix(0, f.last.Load())
}

// Close stops the process and the receiver and drops the table.
func (f *floorProc) Close(ctx context.Context) {
	if f.cmd != nil {
		_ = f.cmd.Process.Kill()
		_ = f.cmd.Wait()
	}
	_ = f.recv.Close()
	_, _ = f.db.Exec(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS `+floorTable) // best effort
}

// floorRun is one reading of the floor: its process's CPU and Postgres's
// over a window of single posts at a rate.
type floorRun struct {
	use       cpuUse
	delivered int
}

// runFloor starts the floor, posts to it at rate for warmUp, unmeasured,
// and then for window (postAtRate, as to Sluice), waits for the posts to
// reach its receiver, and stops it.
func runFloor(ctx context.Context, env *Env, rate float64, window time.Duration) (floorRun, error) {
	f, err := startFloorProc(ctx, env)
	if err != nil {
		return floorRun{}, err
	}
	defer f.Close(ctx)
	post := postFloor(f.url)
	warm, err := postAtRate(ctx, post, "bench.floor", rate, warmUp)
	if err != nil {
		return floorRun{}, fmt.Errorf("warm up: %w", err)
	}
	if f.await(warm, 10*time.Second).IsZero() {
		return floorRun{}, fmt.Errorf("warm up: %d of %d posts arrived", f.got.Load(), warm)
	}
	before := readCPU(f.procs(env))
	start := time.Now()
	posted, err := postAtRate(ctx, post, "bench.floor", rate, window)
	if err != nil {
		return floorRun{}, err
	}
	f.await(warm+posted, time.Until(start.Add(window+10*time.Second)))
	if rest := time.Until(start.Add(window)); rest > 0 {
		time.Sleep(rest)
	}
	return floorRun{use: readCPU(f.procs(env)).since(before), delivered: int(f.got.Load()) - warm}, nil
}

// startFloor starts the floor process and waits until it answers.
func startFloor(db *pgx.ConnConfig, target string) (string, *exec.Cmd, error) {
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	self, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("find the floor's executable: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), floorAddrEnv+"="+addr, floorTargetEnv+"="+target, floorDBEnv+"="+db.ConnString())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start the floor process: %w", err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			return addr, cmd, nil
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return "", nil, errors.New("the floor process did not start listening within 10 s")
}

// postFloor posts body to the floor at url and wants its 202, with a
// client of its own that keeps its connections as the API's does.
func postFloor(url string) func(context.Context, []byte) error {
	client := newHTTPClient()
	return func(ctx context.Context, body []byte) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("new floor request: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("post to the floor: %w", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return fmt.Errorf("the floor answered %d", resp.StatusCode)
		}
		return nil
	}
}

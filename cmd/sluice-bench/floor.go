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
		return err
	}
	cfg, err := pgxpool.ParseConfig(os.Getenv(floorDBEnv))
	if err != nil {
		return err
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	async, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
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
	return http.ListenAndServe(os.Getenv(floorAddrEnv), http.HandlerFunc(handle))
}

// floorRun is one reading of the floor: its process's CPU and Postgres's
// over a window of single posts at a rate.
type floorRun struct {
	use       cpuUse
	delivered int
}

// runFloor starts the floor, posts to it at rate for window (postAtRate,
// as to Sluice), waits for the posts to reach
// its receiver, and stops it.
func runFloor(ctx context.Context, env *Env, rate float64, window time.Duration) (floorRun, error) {
	var got atomic.Int64
	recv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return floorRun{}, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got.Add(1)
	})}
	go func() { _ = srv.Serve(recv) }()
	defer srv.Close()

	if _, err := env.DB.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+floorTable+
		` (id text PRIMARY KEY, body jsonb NOT NULL, sent_at timestamptz)`); err != nil {
		return floorRun{}, err
	}
	defer env.DB.Exec(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS `+floorTable) //nolint:errcheck // best effort
	addr, cmd, err := startFloor(env.DB.Config(), "http://"+recv.Addr().String()+"/")
	if err != nil {
		return floorRun{}, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	procs := Procs{Sluice: []int{cmd.Process.Pid}, Postmaster: env.Procs.Postmaster}
	before := readCPU(procs)
	start := time.Now()
	posted, err := postAtRate(ctx, postFloor("http://"+addr+"/"), "bench.floor", rate, window)
	if err != nil {
		return floorRun{}, err
	}
	for got.Load() < int64(posted) && time.Since(start) < window+10*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	if rest := time.Until(start.Add(window)); rest > 0 {
		time.Sleep(rest)
	}
	return floorRun{use: readCPU(procs).since(before), delivered: int(got.Load())}, nil
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
		return "", nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), floorAddrEnv+"="+addr, floorTargetEnv+"="+target, floorDBEnv+"="+db.ConnString())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
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

// postFloor posts body to the floor at url and wants its 202.
func postFloor(url string) func(context.Context, []byte) error {
	return func(ctx context.Context, body []byte) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return fmt.Errorf("the floor answered %d", resp.StatusCode)
		}
		return nil
	}
}

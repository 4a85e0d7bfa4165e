package faults

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFaultsShort runs the short form of the fault suite: a worker killed
// with SIGKILL, Postgres stopped with -m immediate and started again,
// Postgres paused with SIGSTOP for 3 s, and a primary stopped with -m
// immediate and its synchronous standby promoted (sluice given both hosts),
// each during a 1,500-event burst, and (transitions) circuits opening and
// closing, deliveries going dead and endpoints answering 410 while a worker
// is killed 3 times during a 1,000-event burst, against separate sluice
// processes and a private cluster of its own.
//
// Every check of each scenario must pass (report.go): nothing lost, every
// accepted event delivered within 30 s of the last fault, duplicates within
// the deliveries in flight at the faults, no endpoint with due deliveries
// more than 10 s without an attempt, deliveries flowing within 5 s of
// Postgres coming back and every endpoint served within 10 s, no 5xx but
// 503, nothing stuck in the database; and in transitions, every circuit
// alert, disabled endpoint and dead delivery in Postgres matched one to one
// with the operational event reporting it, each of those received, signed,
// at the endpoint subscribed to sluice.*, none at those subscribed to *.
func TestFaultsShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs sluice processes and crashes Postgres clusters (~2.5 min)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	suite, err := NewSuite(ctx, Config{SettleLimit: 30 * time.Second, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { suite.Close(false) })

	scenarios, err := Select(Scenarios(true), "workerkill,pgcrash,pgpause,failover,transitions")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			res, err := suite.Run(ctx, sc)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			res.WriteDetail(&b)
			t.Log(b.String())
			if res.Figures.Accepted == 0 {
				t.Fatalf("no post was accepted: %v", res.Figures.Statuses)
			}
			for _, c := range res.Failed() {
				t.Errorf("%s: %s", c.Name, c.Value)
			}
			for _, n := range res.Notes {
				if strings.HasPrefix(n, "fault injection failed") {
					t.Error(n)
				}
			}
			if t.Failed() {
				logTails(t, res.Dir)
			}
		})
	}
}

// logTails logs the end of each process's log before the directory goes.
func logTails(t *testing.T, dir string) {
	for _, name := range []string{"api.log", "worker1.log", "worker2.log", "db-samples.log"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		t.Logf("--- tail of %s ---\n%s", name, strings.Join(lines[max(0, len(lines)-25):], "\n"))
	}
}

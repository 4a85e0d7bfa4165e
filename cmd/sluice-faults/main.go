// Command sluice-faults is Sluice's fault suite (`make faults`): separate
// sluice processes on loopback against a private Postgres cluster, killed,
// crashed and paused under load, and reconciled afterwards. See
// docs/reliability.md and package cmd/sluice-faults/internal/faults.
//
//	sluice-faults [-run workerkill,pgcrash] [-short] [-keep] [-src DIR]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/cmd/sluice-faults/internal/faults"
)

func main() {
	run := flag.String("run", "all", "comma-separated scenarios to run")
	short := flag.Bool("short", false, "scaled-down scenarios (as in make test)")
	keep := flag.Bool("keep", false, "keep the logs even when every scenario passes")
	list := flag.Bool("list", false, "list the scenarios and exit")
	src := flag.String("src", "", "build sluice from this tree instead of the repository (e.g. a git archive of a commit)")
	upgradeFrom := flag.String("upgrade-from", "", "rolling-upgrade: start on sluice built from this tree (e.g. a git archive of the previous release; default: the same tree, built twice)")
	settle := flag.Duration("settle", 120*time.Second, "how long to wait after the last fault for every accepted event")
	flag.Parse()

	all := faults.Scenarios(*short)
	if *list {
		for _, sc := range all {
			fmt.Printf("%-13s %s\n", sc.Name, sc.Title)
		}
		return
	}
	scenarios, err := faults.Select(all, *run)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice-faults:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(runSuite(ctx, faults.Config{Src: *src, UpgradeFrom: *upgradeFrom, SettleLimit: *settle}, scenarios, *keep))
}

func runSuite(ctx context.Context, cfg faults.Config, scenarios []faults.Scenario, keep bool) int {
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	cfg.Logf = logf
	suite, err := faults.NewSuite(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice-faults:", err)
		return 1
	}
	pass := true
	defer func() {
		suite.Close(keep || !pass)
		if keep || !pass {
			fmt.Printf("\nlogs kept in %s\n", suite.Dir())
		}
	}()
	var results []faults.Result
	for _, sc := range scenarios {
		if ctx.Err() != nil {
			break
		}
		r, err := suite.Run(ctx, sc)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sluice-faults:", err)
			pass = false
			continue
		}
		r.WriteDetail(os.Stdout)
		results = append(results, r)
		pass = pass && r.Pass
	}
	fmt.Printf("\n## Fault suite, %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	faults.WriteTable(os.Stdout, results)
	if ctx.Err() != nil || !pass {
		return 1
	}
	return 0
}

// Command bench measures the controller on the local real cluster: reaction
// latencies, API requests per action (from kube-apiserver's audit log), event
// storms, memory with and without unrelated objects, and the state machine's
// Fire. It starts one cluster and the real binary, prints one table and writes
// the same figures as JSON to bench/results/<timestamp>.json, so runs can be
// compared. It measures; it asserts nothing about speed. `make bench` runs it;
// -only runs some of the steps, e.g. `go run ./hack/bench -only "outage recovery"`.
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

type options struct {
	nodes      int
	trials     int // drift trials per kind
	toggles    int // config toggle trials per direction, and version changes
	noops      int
	storm      int
	burst      int
	clutter    int
	resyncWait time.Duration
	outages    int
	outage     time.Duration
	only       string
	binary     string
	outDir     string
	keep       bool
}

func main() {
	var o options
	flag.IntVar(&o.nodes, "nodes", testcluster.DefaultNodes, "kwok nodes in the local cluster")
	flag.IntVar(&o.trials, "trials", 30, "drift-restore trials per kind (DaemonSet deleted, image changed)")
	flag.IntVar(&o.toggles, "toggles", 10, "config toggle trials per direction, and version changes")
	flag.IntVar(&o.noops, "noops", 10, "no-op applies (config changes that leave the DaemonSet as it is)")
	flag.IntVar(&o.storm, "storm", 5000, "status-only updates of the DaemonSet in the event storm")
	flag.IntVar(&o.burst, "burst", 500, "ConfigMap toggles in the config burst")
	flag.IntVar(&o.clutter, "clutter", 1000, "unrelated DaemonSets, and ConfigMaps, created in openshift-insights")
	flag.DurationVar(&o.resyncWait, "resync-window", 20*time.Second, "quiet window over which resyncs (every 2s) are counted")
	flag.IntVar(&o.outages, "outages", 5, "API server outages after which the first correction is timed")
	flag.DurationVar(&o.outage, "outage", 15*time.Second, "how long kube-apiserver stays down in each outage")
	flag.StringVar(&o.only, "only", "", "run only these steps, comma-separated (e.g. \"outage recovery\"); steps that need the controller of \"first apply\" run it first")
	flag.StringVar(&o.binary, "binary", "", "controller binary (default: build ./cmd/runtime-extractor-controller)")
	flag.StringVar(&o.outDir, "out", "", "results directory (default: bench/results in the module)")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (cluster and controller logs)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	began := time.Now()
	root, err := testcluster.ModuleRoot()
	if err != nil {
		return err
	}
	if o.outDir == "" {
		o.outDir = filepath.Join(root, "bench", "results")
	}
	work, err := os.MkdirTemp("", "rec-bench-")
	if err != nil {
		return fmt.Errorf("create work dir: %w", err)
	}
	if o.keep {
		logf("work directory (kept): %s", work)
	} else {
		defer os.RemoveAll(work)
	}

	b, err := setUp(ctx, o, root, work)
	if err != nil {
		return err
	}
	defer b.tearDown()

	steps, err := selectSteps(b, o.only)
	if err != nil {
		return err
	}
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		logf("%s ...", s.name)
		start := time.Now()
		if err := s.fn(ctx); err != nil {
			b.dumpControllerLog()
			return fmt.Errorf("%s: %w", s.name, err)
		}
		logf("%s done in %s", s.name, time.Since(start).Round(100*time.Millisecond))
	}
	b.res.Duration = time.Since(began).Round(time.Second).String()
	b.res.print(os.Stdout)
	path, err := b.res.save(o.outDir)
	if err != nil {
		return err
	}
	fmt.Printf("\nresults written to %s (bench took %s)\n", path, b.res.Duration)
	return nil
}

// step is one measurement. needsController: it uses the controller that
// "first apply" starts.
type step struct {
	name            string
	fn              func(context.Context) error
	needsController bool
}

// selectSteps returns every step in order, or with only (comma-separated
// names) the named ones, preceded by "first apply" when one of them needs it.
func selectSteps(b *bench, only string) ([]step, error) {
	all := []step{
		{"first apply", b.firstApply, false},
		{"no-op applies", b.noopApplies, true},
		{"drift: DaemonSet deleted", b.driftDeleted, true},
		{"drift: image changed", b.driftImage, true},
		{"config toggles", b.configToggles, true},
		{"version changes", b.versionChanges, true},
		{"event storm", b.eventStorm, true},
		{"config burst", b.configBurst, true},
		{"memory", b.memory, true},
		{"restart and resync", b.restartAndResync, true},
		{"leader election", b.leaderElection, true},
		{"outage recovery", b.outageRecovery, false},
		{"fsm Fire", b.fsmFire, false},
	}
	if only == "" {
		return all, nil
	}
	want := map[string]bool{}
	for _, name := range strings.Split(only, ",") {
		if name = strings.TrimSpace(name); name != "" {
			want[name] = true
		}
	}
	var out []step
	for _, s := range all {
		if want[s.name] {
			out = append(out, s)
			delete(want, s.name)
		}
	}
	if len(want) > 0 {
		var names []string
		for _, s := range all {
			names = append(names, strconv.Quote(s.name))
		}
		return nil, fmt.Errorf("-only: unknown step(s) %v; the steps are %s", slices.Sorted(maps.Keys(want)), strings.Join(names, ", "))
	}
	if len(out) > 0 && out[0].name != "first apply" && slices.ContainsFunc(out, func(s step) bool { return s.needsController }) {
		out = append([]step{all[0]}, out...)
	}
	return out, nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

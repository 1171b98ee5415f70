// Command bench measures the controller on the local real cluster: reaction
// latencies, API requests per action (from kube-apiserver's audit log, split
// by resource: DaemonSet, ClusterOperator, Event, other; lease requests apart),
// event storms, config bursts, a long rollout, memory and the state machine's
// Fire. It starts one cluster and the real binary, prints one table and writes
// the same figures as JSON to bench/results/<timestamp>.json. It measures; it
// asserts nothing about speed. `make bench` runs it; -only runs some of the
// steps, e.g. `go run ./hack/bench -only "outage recovery"`.
//
// The floor. Latencies are also printed as ratios to a floor measured in the
// same run: an ideal watcher built into the bench (one client-go watch on the
// DaemonSet that recreates it the moment it sees the deletion, nothing else),
// run as a process of its own like the controller (floor.go).
// The "drift: DaemonSet deleted" step alternates blocks of the controller and
// of the floor (stop the controller, measure the floor, start it again), so a
// cluster that speeds up or slows down during the run weighs on both alike;
// -trials samples of each over -blocks blocks.
//
// The reference. Each run is compared with bench/reference/latest.json (a
// whole run, with the machine it ran on; -write-reference replaces it). Every
// figure is printed beside the reference's, and regressions are flagged:
//   - request counts exactly: any mean per trial above the reference's
//     (means rounded to hundredths, as saved), resource by resource;
//   - latencies as p50 ratios to the floor, when the ratio exceeds the
//     reference's by more than 15% (ratioTolerance). The median of 50
//     samples whose p95 is about twice the p50 has a standard error near 5%,
//     a ratio of two such medians near 7%: 15% is about two of those (the
//     drift-delete row takes 100 samples of each, near 5%). Rows with fewer
//     than 20 samples are shown, not judged; raw milliseconds are never
//     judged, as they move with the machine.
//
// Update the reference in the same commit as a change that moves a figure on
// purpose.
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
	nodes           int
	trials          int // DaemonSet-deleted samples of the controller, and of the floor
	blocks          int // over how many interleaved blocks
	imageTrials     int
	toggles         int // config toggle trials per direction, and version changes
	noops           int
	storm           int
	burst           int
	rolloutNodes    int
	rolloutInterval time.Duration
	clutter         int
	resyncWait      time.Duration
	repairEvery     time.Duration // the controller's --repair-every
	fightFor        time.Duration // how long the fight step's other writer writes
	outages         int
	outage          time.Duration
	scaleNodes      int
	scaleSmall      int
	scaleLargest    int
	scaleTrials     int
	scaleBlocks     int
	scaleQPS        int
	only            string
	binary          string
	outDir          string
	reference       string
	writeReference  bool
	keep            bool
	idealWatcher    string // the kubeconfig of the ideal watcher this process is to be (floor.go)
}

func main() {
	var o options
	flag.IntVar(&o.nodes, "nodes", testcluster.DefaultNodes, "kwok nodes in the local cluster")
	flag.IntVar(&o.trials, "trials", 100, "DaemonSet-deleted samples of the controller, and as many of the floor")
	flag.IntVar(&o.blocks, "blocks", 5, "interleaved blocks (controller, then floor) the DaemonSet-deleted samples are taken in")
	flag.IntVar(&o.imageTrials, "image-trials", 40, "image-changed drift samples of the controller, and as many of the floor (interleaved in -blocks blocks)")
	flag.IntVar(&o.toggles, "toggles", 10, "config toggle trials per direction, and version changes")
	flag.IntVar(&o.noops, "noops", 10, "no-op applies (config changes that leave the DaemonSet as it is)")
	flag.IntVar(&o.storm, "storm", 5000, "status-only updates of the DaemonSet in the event storm")
	flag.IntVar(&o.burst, "burst", 200, "ConfigMap toggles in the config burst (an even number ends enabled)")
	flag.IntVar(&o.rolloutNodes, "rollout-nodes", 10, "nodes that join one at a time in the long rollout")
	flag.DurationVar(&o.rolloutInterval, "rollout-interval", 2*time.Second, "time between two nodes joining in the long rollout")
	flag.IntVar(&o.clutter, "clutter", 1000, "unrelated DaemonSets, and ConfigMaps, created in openshift-insights")
	flag.DurationVar(&o.resyncWait, "resync-window", 20*time.Second, "quiet window over which resyncs (every 2s) are counted")
	flag.DurationVar(&o.repairEvery, "repair-every", time.Millisecond, "the controller's --repair-every (with --repair-settle 0): drift trials follow one another within seconds, so at its default (1m) they would spend the repair budget and time its allowance; 1ms never makes a trial's repair wait")
	flag.DurationVar(&o.fightFor, "fight", 2*time.Minute, "how long another writer fights the controller (at the default repair budget) in the fight step")
	flag.IntVar(&o.outages, "outages", 5, "API server outages after which the first correction is timed")
	flag.DurationVar(&o.outage, "outage", 15*time.Second, "how long kube-apiserver stays down in each outage")
	flag.IntVar(&o.scaleNodes, "scale-nodes", 1000, "kwok nodes of the large cluster in the scale group (0 skips the group)")
	flag.IntVar(&o.scaleLargest, "scale-largest", 2000, "kwok nodes of a third, largest cluster in the scale group, OpenShift's tested maximum (0 or not above -scale-nodes: none)")
	flag.IntVar(&o.scaleSmall, "scale-small", testcluster.DefaultNodes, "kwok nodes of the small cluster the scale group compares with")
	flag.IntVar(&o.scaleTrials, "scale-trials", 10, "drift-delete samples per size in the scale group, of the controller and as many of the floor")
	flag.IntVar(&o.scaleBlocks, "scale-blocks", 2, "interleaved blocks the scale group's drift samples are taken in")
	flag.IntVar(&o.scaleQPS, "scale-qps", 200, "client QPS of kube-controller-manager and kube-scheduler on the scale clusters (their defaults, 20 and 50, bound a 1,000-pod rollout)")
	flag.StringVar(&o.only, "only", "", "run only these steps, comma-separated (e.g. \"outage recovery\"); steps that need the controller of \"first apply\" run it first")
	flag.StringVar(&o.binary, "binary", "", "controller binary (default: build ./cmd/runtime-extractor-controller)")
	flag.StringVar(&o.outDir, "out", "", "results directory (default: bench/results in the module)")
	flag.StringVar(&o.reference, "reference", "", "the run to compare with (default: bench/reference/latest.json in the module)")
	flag.BoolVar(&o.writeReference, "write-reference", false, "also write this run as the reference")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (cluster and controller logs)")
	flag.StringVar(&o.idealWatcher, idealWatcherFlag, "", "run as the ideal watcher with this kubeconfig (the bench starts itself so)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.idealWatcher != "" {
		if err := runIdealWatcher(ctx, o.idealWatcher); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
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
	if o.reference == "" {
		o.reference = filepath.Join(root, "bench", "reference", "latest.json")
	}
	ref, err := loadReference(o.reference)
	if err != nil {
		return err
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
	b.res.finish()
	if ref != nil {
		b.res.Reference = relativeTo(root, o.reference)
		b.res.compare(ref)
	}
	b.res.print(os.Stdout, ref)
	path, err := b.res.save(o.outDir)
	if err != nil {
		return err
	}
	fmt.Printf("\nresults written to %s (bench took %s)\n", path, b.res.Duration)
	if o.writeReference {
		if err := b.res.saveAs(o.reference); err != nil {
			return err
		}
		fmt.Printf("reference written to %s\n", o.reference)
	}
	return nil
}

func relativeTo(root, path string) string {
	if rel, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
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
		{"long rollout", b.longRollout, true},
		{"memory", b.memory, true},
		{"restart and resync", b.restartAndResync, true},
		{"leader election", b.leaderElection, true},
		{"fight", b.fight, true},
		{"outage recovery", b.outageRecovery, false},
		{"fsm Fire", b.fsmFire, false},
		// Last: it stops the main cluster to give the machine to its own.
		{"scale", b.scale, false},
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

package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/insights-runtime-extractor/controller/pkg/status"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// heldNodes is how many nodes the diagnosis step leaves without a ready pod
// in a large cluster: more than the three a message names, so that the names
// come from anywhere in the pod list's pages, and fewer than maxUnavailable.
// A small cluster holds a tenth of its nodes, at least one.
const heldNodes = 15

func heldCount(nodes int) int { return min(heldNodes, max(1, nodes/10)) }

// memoryTarget is issue 36's bound on the controller's RSS growth from its
// start, at any node count.
const memoryTarget = 5 << 20

// scaleMemory is the controller's RSS at the moments issue 36 names, each the
// median of five scrapes, and what the unavailable-node diagnosis cost.
type scaleMemory struct {
	StartRSSBytes        int64   `json:"startRssBytes"`        // the first process, caches synced
	UpgradeStartRSSBytes int64   `json:"upgradeStartRssBytes"` // the restarted process, caches synced
	UpgradedRSSBytes     int64   `json:"upgradedRssBytes"`     // idle after the upgrade's rollout
	DiagnosedRSSBytes    int64   `json:"diagnosedRssBytes"`    // idle after the nodes were named
	DiagnosisS           float64 `json:"diagnosisSeconds"`     // pods held -> nodes named
	DiagnosisPodLists    int     `json:"diagnosisPodLists"`    // list requests on pods (pages)
	// Go is the Go runtime's account at each point: "start", "idle" (after
	// the first rollout), "upgradeStart", "upgraded", "diagnosed".
	Go map[string]goMemory `json:"go,omitempty"`
}

// goMemory is the Go runtime's account of the controller's memory at one
// point, from the Go collector's metrics, to tell what an RSS growth is: live
// data, the heap filling up to its GC goal (twice the live heap at GOGC 100),
// or freed heap the runtime has not yet returned to the OS.
type goMemory struct {
	HeapLiveBytes     int64 `json:"heapLiveBytes"`     // marked live by the last GC
	HeapGoalBytes     int64 `json:"heapGoalBytes"`     // the heap size the next GC starts at
	HeapInuseBytes    int64 `json:"heapInuseBytes"`    // spans with objects, live or not yet collected
	HeapIdleBytes     int64 `json:"heapIdleBytes"`     // free spans, returned to the OS or not
	HeapReleasedBytes int64 `json:"heapReleasedBytes"` // free spans returned to the OS
	StackInuseBytes   int64 `json:"stackInuseBytes"`
	SysBytes          int64 `json:"sysBytes"` // all the runtime has mapped
	GCCycles          int64 `json:"gcCycles"`
	// The kernel's split of RSS (/proc/PID/status): anonymous memory (the
	// heap, stacks, the runtime's) and file-backed pages (the binary's code
	// and data, paged in as code paths first run).
	RSSAnonBytes int64 `json:"rssAnonBytes"`
	RSSFileBytes int64 `json:"rssFileBytes"`
	// LiveAfterGCBytes is the live heap right after a collection the bench
	// asked for, once the figures above were read, at the last point of each
	// process ("idle", "diagnosed"): what the process really keeps, where
	// HeapLiveBytes also counts whatever was in flight when the runtime last
	// collected on its own.
	LiveAfterGCBytes int64 `json:"liveAfterGcBytes"`
}

// heldBytes is the heap the process holds resident, as far as the runtime
// knows: spans in use and free spans not yet returned.
func (g goMemory) heldBytes() int64 { return g.HeapInuseBytes + g.HeapIdleBytes - g.HeapReleasedBytes }

// goMemoryOf reads the Go collector's metrics; an absent one reads 0.
func goMemoryOf(m *testcluster.Metrics) goMemory {
	get := func(names ...string) int64 {
		for _, n := range names {
			if m.Has(n) {
				return int64(m.Sum(n))
			}
		}
		return 0
	}
	return goMemory{
		HeapLiveBytes:     get("go_gc_heap_live_bytes"),
		HeapGoalBytes:     get("go_gc_heap_goal_bytes", "go_memstats_next_gc_bytes"),
		HeapInuseBytes:    get(testcluster.MetricHeapInuse),
		HeapIdleBytes:     get("go_memstats_heap_idle_bytes"),
		HeapReleasedBytes: get("go_memstats_heap_released_bytes"),
		StackInuseBytes:   get("go_memstats_stack_inuse_bytes"),
		SysBytes:          get("go_memstats_sys_bytes"),
		GCCycles:          get("go_gc_cycles_total_gc_cycles_total", "go_gc_duration_seconds"),
	}
}

// withProcRSS adds the kernel's split of pid's RSS; it leaves g as it is
// where /proc does not tell (not Linux).
func (g goMemory) withProcRSS(pid int) goMemory {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return g
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var kb int64
		if _, err := fmt.Sscanf(strings.TrimSpace(value), "%d kB", &kb); err != nil {
			continue
		}
		switch name {
		case "RssAnon":
			g.RSSAnonBytes = kb << 10
		case "RssFile":
			g.RSSFileBytes = kb << 10
		}
	}
	return g
}

// liveHeap is the controller's live heap right after a collection it has
// the controller run. The collection, and the profile handler it goes
// through, change the heap and page in code: so it is read only at the last
// point of a process, after every other reading of that point.
func (b *bench) liveHeap(ctx context.Context) (int64, error) {
	if err := b.ctrl.CollectGarbage(ctx); err != nil {
		return 0, err
	}
	m, err := b.ctrl.scrape(ctx)
	if err != nil {
		return 0, err
	}
	return int64(m.Sum("go_gc_heap_live_bytes")), nil
}

// setGo records g at point.
func (m *scaleMemory) setGo(point string, g goMemory) {
	if m.Go == nil {
		m.Go = map[string]goMemory{}
	}
	m.Go[point] = g
}

// scaleDiagnosis leaves heldNodes nodes without a ready pod (kwok holds their
// pods, which are deleted and come back unready), waits for the controller's
// Available condition to name the first of them, and measures its RSS then.
func (b *bench) scaleDiagnosis(ctx context.Context, mem *scaleMemory) error {
	held := slices.Clone(b.cluster.Nodes[len(b.cluster.Nodes)-heldCount(len(b.cluster.Nodes)):])
	slices.Sort(held)
	if err := b.cluster.HoldPods(ctx, held...); err != nil {
		return fmt.Errorf("hold pods: %w", err)
	}
	start := time.Now()
	zero := int64(0)
	for _, node := range held {
		pods, err := b.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
		if err != nil {
			return fmt.Errorf("list pods on %s: %w", node, err)
		}
		for _, p := range pods.Items {
			if err := b.kube.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				return fmt.Errorf("delete pod %s: %w", p.Name, err)
			}
		}
	}
	var msg string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, b.timeout, true, func(ctx context.Context) (bool, error) {
		co, err := b.config.ConfigV1().ClusterOperators().Get(ctx, "insights", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range co.Status.Conditions {
			if c.Type == status.ConditionAvailable {
				msg = c.Message
			}
		}
		return strings.Contains(msg, ": "+held[0]), nil
	})
	if err != nil {
		return fmt.Errorf("wait for the controller to name %s: %w (Available: %q)", held[0], err, msg)
	}
	named := time.Now()
	mem.DiagnosisS = round1(named.Sub(start).Seconds())
	logf("scale: %d nodes: %s", len(b.cluster.Nodes), msg)
	m, err := b.sampleMemory(ctx, "diagnosed")
	if err != nil {
		return err
	}
	mem.DiagnosedRSSBytes = m.RSSBytes
	if m.Go.LiveAfterGCBytes, err = b.liveHeap(ctx); err != nil {
		return err
	}
	mem.setGo("diagnosed", m.Go)
	if err := b.flushAudit(ctx); err != nil {
		return err
	}
	for _, e := range b.requestsBetween(start, named.Add(tail)) {
		if e.Resource == "pods" && e.Verb == "list" {
			mem.DiagnosisPodLists++
		}
	}
	return nil
}

// startRSS returns the controller's RSS at the start issue 36 names: its
// caches synced, before any diagnosis. The first event the state machine
// processes (transitions_total counts those that keep the state too) comes
// only after the informers synced, and before the rollout it starts could be
// diagnosed.
func (b *bench) startRSS(ctx context.Context) (int64, goMemory, error) {
	var (
		rss float64
		g   goMemory
	)
	// Every 250 ms: each scrape allocates in the controller, and many of them
	// before this point would fill its heap early and hide growth after it.
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		m, err := b.ctrl.scrape(ctx)
		if err != nil || m.Sum(testcluster.MetricTransits) == 0 {
			return false, nil
		}
		rss, g = m.Sum(testcluster.MetricRSS), goMemoryOf(m).withProcRSS(b.ctrl.PID())
		return rss > 0, nil
	})
	return int64(rss), g, err
}

// printMemory prints the RSS rows, each against the start of its process.
func printMemory(row func(string, func(scaleRun) string, string), runs []scaleRun) {
	judge := func(get func(scaleRun) (int64, int64)) string {
		worst := int64(0)
		for _, s := range runs {
			at, from := get(s)
			worst = max(worst, at-from)
		}
		verdict := "met"
		if worst > memoryTarget {
			verdict = "NOT MET"
		}
		return fmt.Sprintf("(largest growth %s, target ≤ %s: %s)", mib(worst), mib(memoryTarget), verdict)
	}
	grown := func(get func(scaleRun) (int64, int64)) func(scaleRun) string {
		return func(s scaleRun) string {
			at, from := get(s)
			return fmt.Sprintf("%s (%+.1f)", mib(at), float64(at-from)/(1<<20))
		}
	}
	mb := func(b int64) float64 { return float64(b) / (1 << 20) }
	// Beside each RSS figure, the Go runtime's: what the heap holds resident
	// (in use, and free but not returned to the OS) against its live part
	// and its GC goal, then stacks, what was returned, and GC cycles so far.
	goRows := func(point string) {
		if !slices.ContainsFunc(runs, func(s scaleRun) bool { _, ok := s.Memory.Go[point]; return ok }) {
			return
		}
		row("    Go heap MiB: held / live / goal", func(s scaleRun) string {
			g := s.Memory.Go[point]
			return fmt.Sprintf("%.1f/%.1f/%.1f", mb(g.heldBytes()), mb(g.HeapLiveBytes), mb(g.HeapGoalBytes))
		}, "")
		row("    Go MiB: stacks / released to the OS; GC cycles", func(s scaleRun) string {
			g := s.Memory.Go[point]
			return fmt.Sprintf("%.1f/%.1f; %d", mb(g.StackInuseBytes), mb(g.HeapReleasedBytes), g.GCCycles)
		}, "")
		row("    RSS MiB: anonymous / file-backed (the binary's pages)", func(s scaleRun) string {
			g := s.Memory.Go[point]
			return fmt.Sprintf("%.1f/%.1f", mb(g.RSSAnonBytes), mb(g.RSSFileBytes))
		}, "")
	}
	// What the process keeps, apart from how full its heap is: the live heap
	// after a collection, read at the last point of each process.
	live := func(s scaleRun) string {
		return fmt.Sprintf("%.2f / %.2f", mb(s.Memory.Go["idle"].LiveAfterGCBytes), mb(s.Memory.Go["diagnosed"].LiveAfterGCBytes))
	}
	// How far apart the sizes are at the same point: what grows with the
	// node count.
	liveSpread := func() string {
		worst := int64(0)
		for _, point := range []string{"idle", "diagnosed"} {
			var at []int64
			for _, s := range runs {
				at = append(at, s.Memory.Go[point].LiveAfterGCBytes)
			}
			if len(at) > 0 {
				worst = max(worst, slices.Max(at)-slices.Min(at))
			}
		}
		return fmt.Sprintf("(sizes apart at one point: at most %.2f MiB)", mb(worst))
	}
	row("controller RSS at start (caches synced)", func(s scaleRun) string { return mib(s.Memory.StartRSSBytes) }, "")
	goRows("start")
	first := func(s scaleRun) (int64, int64) { return s.IdleRSSBytes, s.Memory.StartRSSBytes }
	row("  after the first rollout (MiB above start)", grown(first), judge(first))
	goRows("idle")
	row("restarted for the upgrade: RSS at start", func(s scaleRun) string { return mib(s.Memory.UpgradeStartRSSBytes) }, "")
	goRows("upgradeStart")
	up := func(s scaleRun) (int64, int64) { return s.Memory.UpgradedRSSBytes, s.Memory.UpgradeStartRSSBytes }
	row("  after the upgrade's rollout of every pod", grown(up), judge(up))
	goRows("upgraded")
	diag := func(s scaleRun) (int64, int64) { return s.Memory.DiagnosedRSSBytes, s.Memory.UpgradeStartRSSBytes }
	row(fmt.Sprintf("  after naming unready nodes (a tenth held, at most %d)", heldNodes), grown(diag), judge(diag))
	goRows("diagnosed")
	row("live heap MiB after a collection: first process idle / second diagnosed", live, liveSpread())
	row("  diagnosis: pods held -> named (s), pod list pages", func(s scaleRun) string {
		return fmt.Sprintf("%.1f s, %d", s.Memory.DiagnosisS, s.Memory.DiagnosisPodLists)
	}, "")
}

// cpuPerRollout judges the largest size's CPU per rollout against the one
// before it (issue 36: at most twice).
func cpuPerRollout(runs []scaleRun) string {
	if len(runs) < 3 {
		return ""
	}
	a, b := runs[len(runs)-2], runs[len(runs)-1]
	ratio := (b.FirstRollout.CPUSeconds + b.Upgrade.CPUSeconds) / max(a.FirstRollout.CPUSeconds+a.Upgrade.CPUSeconds, 0.01)
	verdict := "met"
	if ratio > 2 {
		verdict = "NOT MET"
	}
	return fmt.Sprintf("(%d nodes / %d nodes: %.2f×, target ≤ 2×: %s)", b.Nodes, a.Nodes, ratio, verdict)
}

package main

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

func TestTallySplitsByResourceAndKeepsLeasesApart(t *testing.T) {
	events := []testcluster.AuditEvent{
		{Verb: "create", Resource: "daemonsets"},
		{Verb: "get", Resource: "daemonsets"},
		{Verb: "patch", Resource: "clusteroperators", Subresource: "status"},
		{Verb: "create", Resource: "events"},
		{Verb: "update", Resource: "leases"},
		{Verb: "get", Resource: "leases"},
		{Verb: "create", Resource: "tokenreviews"},
		{Verb: "get", RequestURI: "/apis?timeout=32s"},
	}
	got := tallyRequests(events).c
	want := counts{
		DaemonSet: rw{1, 1}, ClusterOperator: rw{0, 1}, Event: rw{0, 1}, Other: rw{1, 0},
		Total: rw{2, 3}, Lease: 2,
	}
	if got != want {
		t.Fatalf("tally = %+v, want %+v", got, want)
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	for _, c := range []struct {
		name string
		v    []float64
		p    float64
		want float64
	}{
		{"empty", nil, 0.5, 0},
		{"one value, p50", []float64{7}, 0.5, 7},
		{"one value, p95", []float64{7}, 0.95, 7},
		{"odd, p50 is the middle", []float64{3, 1, 2}, 0.5, 2},
		{"even, p50 is the lower middle", []float64{4, 1, 3, 2}, 0.5, 2},
		{"even, p75", []float64{4, 1, 3, 2}, 0.75, 3},
		{"p95 of 20 is the 19th", []float64{20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 0.95, 19},
		{"p100 is the maximum", []float64{5, 9, 1}, 1, 9},
		{"p0 is the minimum", []float64{5, 9, 1}, 0, 1},
	} {
		in := slices.Clone(c.v)
		if got := percentile(c.v, c.p); got != c.want {
			t.Errorf("%s: percentile(%v, %v) = %v, want %v", c.name, c.v, c.p, got, c.want)
		}
		if !slices.Equal(c.v, in) {
			t.Errorf("%s: the input was reordered to %v", c.name, c.v)
		}
	}
	if got := percentile([]time.Duration{3 * time.Millisecond, time.Millisecond}, 0.5); got != time.Millisecond {
		t.Errorf("durations: p50 = %v, want 1ms", got)
	}
	if got := percentile([]time.Duration(nil), 0.5); got != 0 {
		t.Errorf("no durations: p50 = %v, want 0", got)
	}
}

func TestWindowsRunToTheNextStartOrTheFinish(t *testing.T) {
	var w windows
	t0 := time.Now()
	w.beginAt(t0)
	w.beginAt(t0.Add(time.Second))
	w.closeAt(t0.Add(2 * time.Second))
	w.closeAt(t0.Add(5 * time.Second)) // nothing open: no effect
	w.beginAt(t0.Add(10 * time.Second))
	w.closeAt(t0.Add(11 * time.Second))
	want := [][2]time.Time{
		{t0, t0.Add(time.Second)},
		{t0.Add(time.Second), t0.Add(2 * time.Second)},
		{t0.Add(10 * time.Second), t0.Add(11 * time.Second)},
	}
	if len(w.spans) != len(want) {
		t.Fatalf("%d spans, want %d", len(w.spans), len(want))
	}
	for i := range want {
		if !w.spans[i][0].Equal(want[i][0]) || !w.spans[i][1].Equal(want[i][1]) {
			t.Errorf("#%d: span %v, want %v", i, w.spans[i], want[i])
		}
	}
}

func TestVerdicts(t *testing.T) {
	ref := counts{DaemonSet: rw{0, 1}, Event: rw{0, 1}}
	for i, c := range []struct {
		now  counts
		want string
	}{
		{ref, "="},
		{counts{DaemonSet: rw{0, 1}, Event: rw{0, 1.01}}, "REGRESSION: Event writes 1.01 > 1"},
		{counts{DaemonSet: rw{0, 1}}, "better"},
	} {
		if got := countsVerdict(c.now, ref); got != c.want {
			t.Errorf("#%d: countsVerdict = %q, want %q", i, got, c.want)
		}
	}
	refLat := &latency{N: 50, P50Floor: 1.2}
	for i, c := range []struct {
		now  latency
		want string
	}{
		{latency{N: 50, P50Floor: 1.3}, "="},
		{latency{N: 50, P50Floor: 1.4}, "REGRESSION"},
		{latency{N: 50, P50Floor: 1.0}, "better"},
		{latency{N: 10, P50Floor: 3}, "(too few samples to judge)"},
		{latency{N: 50, P50Floor: 3, FloorKey: keyImageFloor}, "(the reference measured it against another floor)"},
		{latency{N: 50, P50Floor: 1.2, FloorKey: keyFloor}, "="},
	} {
		if got := latencyVerdict(&c.now, refLat); got != c.want {
			t.Errorf("#%d: latencyVerdict = %q, want %q", i, got, c.want)
		}
	}
}

// A run compared with itself has no regression; one more DaemonSet write per
// repair, or a slower ratio, is one; the table prints the reference beside.
func TestCompareAgainstTheCommittedReference(t *testing.T) {
	ref, err := loadReference("../../bench/reference/latest.json")
	if err != nil || ref == nil {
		t.Fatalf("load the committed reference: %v", err)
	}
	same, _ := loadReference("../../bench/reference/latest.json")
	same.compare(ref)
	if len(same.Regressions) > 0 {
		t.Fatalf("the reference regresses against itself: %q", same.Regressions)
	}

	worse, _ := loadReference("../../bench/reference/latest.json")
	worse.requestRow(keyDriftDelete).PerTrial.DaemonSet.Writes++
	worse.latency(keyDriftDelete).P50Floor *= 1.5
	worse.compare(ref)
	if len(worse.Regressions) != 2 {
		t.Fatalf("regressions %q, want the DaemonSet writes and the latency ratio", worse.Regressions)
	}
	var out bytes.Buffer
	worse.print(&out, ref)
	for _, want := range []string{"Issue 13 targets", "(ref 0/1)", "REGRESSION", "floor: ideal watcher"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q", want)
		}
	}
}

func TestProcUsageOfThisProcess(t *testing.T) {
	cpu0, rss, err := procUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if rss <= float64(os.Getpagesize()) {
		t.Errorf("procUsage(self): %g bytes resident, not more than a page", rss)
	}
	// /proc/PID/stat and getrusage read the kernel's one account of the
	// process's CPU time; /proc gives it in whole clock ticks, rounded down,
	// user and system time apart.
	before := rusageSeconds(t)
	cpu1, _, err := procUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	after := rusageSeconds(t)
	const tick = 1.0 / userHZ
	if cpu1 < before-2*tick-1e-9 || cpu1 > after+1e-9 {
		t.Errorf("procUsage(self): %g CPU seconds, getrusage %g before and %g after", cpu1, before, after)
	}
	// And it moves: spin until it reads more than at first.
	deadline := time.Now().Add(10 * time.Second)
	for {
		cpu, _, err := procUsage(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if cpu > cpu0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU seconds still %g after 10 s of spinning", cpu)
		}
	}
	if _, _, err := procUsage(-1); err == nil {
		t.Error("procUsage(-1): no error")
	}
}

// rusageSeconds is this process's CPU time, user and system, from getrusage.
func rusageSeconds(t *testing.T) float64 {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

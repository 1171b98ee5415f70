package main

import (
	"bytes"
	"strings"
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

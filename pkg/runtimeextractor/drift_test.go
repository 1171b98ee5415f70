package runtimeextractor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/internal/logcapture"
	"github.com/insights-runtime-extractor/controller/pkg/metrics"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func entry(manager string, op metav1.ManagedFieldsOperationType, at time.Time, subresource string) metav1.ManagedFieldsEntry {
	mt := metav1.NewTime(at)
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Time: &mt, Subresource: subresource,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}
}

func withFields(entries ...metav1.ManagedFieldsEntry) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { ds.ManagedFields = entries }
}

// The observation of a spec or metadata change names the newest field
// manager that is not ours, leaving out status writes and entries the change
// did not touch; a tie names every writer; a deletion names none.
func TestObservationNamesTheWriter(t *testing.T) {
	own := entry(resources.FieldManager, metav1.ManagedFieldsOperationUpdate, t0.Add(5*time.Second), "")
	status := entry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, t0.Add(9*time.Second), "status")
	older := entry("argocd", metav1.ManagedFieldsOperationApply, t0, "")
	patch := entry("kubectl-patch", metav1.ManagedFieldsOperationUpdate, t0.Add(time.Second), "")
	tied := entry("helm", metav1.ManagedFieldsOperationUpdate, t0.Add(time.Second), "")

	for _, tc := range []struct {
		name string
		feed func(ri *daemonSetInformer)
		want []string
	}{
		{"spec change: the newest foreign entry", func(ri *daemonSetInformer) {
			ri.onUpdate(managed(3, withFields(own, status, older)), managed(4, withFields(own, status, older, patch)))
		}, []string{"kubectl-patch Update 12:00:01"}},
		{"a tie names both", func(ri *daemonSetInformer) {
			ri.onUpdate(managed(3, withFields(own, older)), managed(4, withFields(own, older, patch, tied)))
		}, []string{"kubectl-patch Update 12:00:01", "helm Update 12:00:01"}},
		{"owned label removed: an entry the change did not touch is not its writer", func(ri *daemonSetInformer) {
			ri.onUpdate(managed(3, withFields(own, older)), managed(3, withFields(own, older), func(ds *appsv1.DaemonSet) {
				delete(ds.Labels, resources.LabelManagedBy)
			}))
		}, nil},
		{"owned annotation changed by an Apply", func(ri *daemonSetInformer) {
			later := entry("argocd", metav1.ManagedFieldsOperationApply, t0.Add(2*time.Second), "")
			ri.onUpdate(managed(3, withFields(own, older)), managed(3, withFields(own, later), func(ds *appsv1.DaemonSet) {
				ds.Annotations[resources.VersionAnnotation] = "1.0"
			}))
		}, []string{"argocd Apply 12:00:02"}},
		{"recreated: the newest foreign entry of the new object", func(ri *daemonSetInformer) {
			ri.onAdd(managed(1, withFields(older, patch), func(ds *appsv1.DaemonSet) { ds.UID = "uid-2" }), false)
		}, []string{"kubectl-patch Update 12:00:01"}},
		{"deleted: nothing to read", func(ri *daemonSetInformer) {
			ri.onDelete(managed(3, withFields(own, patch)))
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ri := newTestInformer(t)
			tc.feed(ri)
			obs := ri.drainDrift()
			if len(obs) != 1 {
				t.Fatalf("observed %+v, want one observation", obs)
			}
			var got []string
			for _, w := range obs[0].Edits {
				got = append(got, w.Manager+" "+w.Operation+" "+w.Time.UTC().Format("15:04:05"))
			}
			if strings.Join(got, "; ") != strings.Join(tc.want, "; ") {
				t.Fatalf("writers %q, want %q", got, tc.want)
			}
		})
	}
}

// A manager name is the client's choice: it is made printable and bounded.
func TestWriterNamesAreSanitized(t *testing.T) {
	hostile := "evil\x1b[31m\n\u202e" + strings.Repeat("x", 10000) + "\xff"
	ri := newTestInformer(t)
	ri.onUpdate(managed(3), managed(4, withFields(entry(hostile, metav1.ManagedFieldsOperationUpdate, t0, ""))))
	obs := ri.drainDrift()
	if len(obs) != 1 || len(obs[0].Edits) != 1 {
		t.Fatalf("observed %+v, want one writer", obs)
	}
	name := obs[0].Edits[0].Manager
	if len(name) > resources.MaxNameBytes || !utf8.ValidString(name) || strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		t.Fatalf("manager %q (%d bytes): want printable, valid UTF-8, at most %d bytes", name, len(name), resources.MaxNameBytes)
	}
	if !strings.HasPrefix(name, "evil?[31m?") {
		t.Fatalf("manager %q: want its printable beginning kept", name)
	}
}

// The whole path: a change written with field manager kubectl-patch (the
// fake API keeps managedFields from each write's field manager, as the API
// server does) is repaired, and the Event, the log line and the per-manager counter name
// kubectl-patch.
func TestRepairNamesTheWriterInEventLogAndMetric(t *testing.T) {
	logged := logcapture.Klog(t)
	m := metrics.New()
	h, reg := runningWithMetrics(t, m)

	ds := h.stored().DeepCopy()
	want := extractorOf(ds).Image
	extractorOf(ds).Image = "quay.io/someone/else:latest"
	if _, err := h.api.Client.AppsV1().DaemonSets(resources.Namespace).Update(context.Background(), ds, metav1.UpdateOptions{FieldManager: "kubectl-patch"}); err != nil {
		t.Fatal(err)
	}
	h.waitStored("the image to be restored", func(ds *appsv1.DaemonSet) bool { return extractorOf(ds).Image == want })
	const who = "changed by kubectl-patch (Update at "
	h.eventually("an Updated Event naming the image and kubectl-patch", func() bool {
		return h.changes.mentions(ReasonUpdated, "(spec changed: restored container extractor image), "+who)
	})
	h.stop()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP runtime_extractor_repairs_total Repairs of changes made by someone else, by the field manager that made them (from managedFields; "unknown" for a deletion or a change no entry names; at most 10 values, then "other").
# TYPE runtime_extractor_repairs_total counter
runtime_extractor_repairs_total{manager="kubectl-patch"} 1
`), "runtime_extractor_repairs_total"); err != nil {
		t.Error(err)
	}
	out := logged()
	if !strings.Contains(out, "was changed by someone else (spec changed), "+who) {
		t.Errorf("no log line naming kubectl-patch in:\n%s", out)
	}
	// library-go's logging recorder dumped a raw Event struct per write.
	if strings.Contains(out, "&Event{") || strings.Contains(out, resources.EventReasonCreated) {
		t.Errorf("the log carries library-go's Events:\n%s", out)
	}
}

// extractorOf is ds's extractor container (the host's template lists it last).
func extractorOf(ds *appsv1.DaemonSet) *corev1.Container {
	c := ds.Spec.Template.Spec.Containers
	return &c[slices.IndexFunc(c, func(c corev1.Container) bool { return c.Name == resources.ContainerExtractor })]
}

// Naming the writers runs on the informer's goroutine, for objects that can
// carry about 10,000 managedFields entries: its work grows with the entries,
// not with their square (a search of old's entries for each of cur's).
// Allocations are the deterministic measure of that work.
func TestChangedByWorkIsLinearInTheEntries(t *testing.T) {
	const n = 2000
	old := managed(3, withFields(manyApplyEntries(n, func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) })...))
	cur := managed(4, withFields(append(old.DeepCopy().ManagedFields,
		entry("kubectl-patch", metav1.ManagedFieldsOperationUpdate, t0.Add(n*time.Second), ""))...))
	var ws []core.Edit
	allocs := testing.AllocsPerRun(1, func() { ws, _ = changedBy(old, cur) })
	if len(ws) != 1 || ws[0].Manager != "kubectl-patch" {
		t.Fatalf("writers %+v, want kubectl-patch alone", ws)
	}
	if allocs > 4*n {
		t.Fatalf("changedBy made %.0f allocations for %d entries, want at most %d", allocs, n, 4*n)
	}
}

// Entries with a crafted time all tie: a tie names the first few writers,
// in managedFields order, not every entry.
func TestTiedWritersAreCapped(t *testing.T) {
	const n = 50
	future := t0.AddDate(100, 0, 0)
	ri := newTestInformer(t)
	ri.onUpdate(managed(3, withFields(manyApplyEntries(n, func(int) time.Time { return t0 })...)),
		managed(4, withFields(manyApplyEntries(n, func(int) time.Time { return future })...)))
	obs := ri.drainDrift()
	if len(obs) != 1 {
		t.Fatalf("observed %+v, want one observation", obs)
	}
	var got []string
	for _, w := range obs[0].Edits {
		got = append(got, w.Manager)
	}
	if want := []string{"applier-00000", "applier-00001", "applier-00002"}; !slices.Equal(got, want) {
		t.Fatalf("writers %q, want %q", got, want)
	}
}

// One repair of a change that many managers wrote adds at most one to
// repairs_total{manager="other"} once the ten named series are taken: the
// counter counts repairs, not managedFields entries.
func TestOneRepairCountsOtherOnce(t *testing.T) {
	m := metrics.New()
	for i := range metrics.MaxManagers {
		m.ObserveRepair(fmt.Sprintf("earlier-%d", i))
	}
	h, reg := runningWithMetrics(t, m)

	ds := h.stored().DeepCopy()
	want := extractorOf(ds).Image
	extractorOf(ds).Image = "quay.io/someone/else:latest"
	future := time.Now().AddDate(100, 0, 0)
	ds.ManagedFields = append(ds.ManagedFields, manyApplyEntries(40, func(int) time.Time { return future })...)
	if _, err := h.api.Client.AppsV1().DaemonSets(resources.Namespace).Update(context.Background(), ds, metav1.UpdateOptions{FieldManager: "kubectl-patch"}); err != nil {
		t.Fatal(err)
	}
	if n := len(h.stored().ManagedFields); n < 40 {
		t.Fatalf("the fake API kept %d managedFields entries, want the 40 crafted ones", n)
	}
	h.waitStored("the image to be restored", func(ds *appsv1.DaemonSet) bool { return extractorOf(ds).Image == want })
	h.eventually("the repair's Event", func() bool { return len(h.changes.with(ReasonUpdated)) > 0 })
	h.stop()
	if got := repairsOf(t, reg, metrics.OtherManager); got != 1 {
		t.Fatalf("repairs_total{manager=%q} = %v after one repair, want 1", metrics.OtherManager, got)
	}
}

// repairsOf reads repairs_total{manager=manager} from reg; 0 without that series.
func repairsOf(t *testing.T, reg *prometheus.Registry, manager string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "runtime_extractor_repairs_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "manager" && l.GetValue() == manager {
					return s.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// runningWithMetrics starts a controller recording into m, registered in
// the returned registry, and waits until its DaemonSet is rolled out and
// Running.
func runningWithMetrics(t *testing.T, m *metrics.Metrics) (*harness, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m.MustRegister(reg)
	h := startWith(t, func(h *harness) { h.opts = append(h.opts, WithMetrics(m)) })
	h.rollOut()
	h.waitState(fsm.StateRunning)
	return h, reg
}

package runtimeextractor

import (
	"fmt"
	"testing"
	"time"

	"github.com/openshift/library-go/pkg/operator/events"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

// manyApplyEntries is n Apply entries of distinct managers, each owning its
// own label, written at times from at.
func manyApplyEntries(n int, at func(i int) time.Time) []metav1.ManagedFieldsEntry {
	out := make([]metav1.ManagedFieldsEntry, 0, n)
	for i := range n {
		mt := metav1.NewTime(at(i))
		out = append(out, metav1.ManagedFieldsEntry{
			Manager: fmt.Sprintf("applier-%05d", i), Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1",
			Time: &mt, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: fmt.Appendf(nil, `{"f:metadata":{"f:labels":{"f:applier-%05d":{}}}}`, i)},
		})
	}
	return out
}

// BenchmarkChangedByTenThousandEntries times the informer's update handler
// (onUpdate: classify, name the writers, queue the observation) on a
// DaemonSet carrying 10,000 Apply entries, as one near the 1.5 MiB object
// limit can. It runs on the informer's goroutine: drift and rollout
// delivery wait for it.
//   - one new entry: someone else's change among 10,000 entries old had;
//   - all tied: 10,000 entries rewritten with one crafted future time.
func BenchmarkChangedByTenThousandEntries(b *testing.B) {
	const n = 10000
	old := managed(3, withFields(manyApplyEntries(n, func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) })...))
	for _, bc := range []struct {
		name string
		cur  *appsv1.DaemonSet
	}{
		{"one new entry", managed(4, withFields(append(old.DeepCopy().ManagedFields,
			entry("kubectl-patch", metav1.ManagedFieldsOperationUpdate, t0.Add(n*time.Second), ""))...))},
		{"all tied", managed(4, withFields(manyApplyEntries(n, func(int) time.Time { return t0.AddDate(100, 0, 0) })...))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ri, err := NewResourceInformer(events.NewInMemoryRecorder("bench", clocktesting.NewFakePassiveClock(t0)),
				informers.NewSharedInformerFactory(fake.NewClientset(), 0))
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				ri.onUpdate(old, bc.cur)
				if obs := ri.drainDrift(); len(obs) != 1 {
					b.Fatalf("observed %d changes, want 1", len(obs))
				}
			}
		})
	}
}

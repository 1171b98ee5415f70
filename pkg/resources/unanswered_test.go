package resources

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/insights-runtime-extractor/controller/pkg/core"
)

func TestMayHaveWritten(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "daemonsets"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&url.Error{Op: "Post", URL: "https://api/apis/apps/v1", Err: io.EOF}, true},
		{fmt.Errorf("unexpected error when reading response body. Please retry. Original error: %w", io.ErrUnexpectedEOF), true},
		{&url.Error{Op: "Put", URL: "https://api", Err: syscall.ECONNRESET}, true},
		{context.DeadlineExceeded, true},
		{apierrors.NewTimeoutError("the request took too long", 0), true},
		{apierrors.NewServerTimeout(gr, "create", 1), true},
		{&url.Error{Op: "Post", URL: "https://api", Err: syscall.ECONNREFUSED}, false},
		{apierrors.NewConflict(gr, DaemonSetName, errors.New("the object has been modified")), false},
		{apierrors.NewForbidden(gr, DaemonSetName, errors.New("denied by policy")), false},
		{apierrors.NewServiceUnavailable("shutting down"), false},
		{fmt.Errorf("apply daemonset: %w", ErrImagesUnset), false},
	} {
		if got := mayHaveWritten(tc.err); got != tc.want {
			t.Errorf("mayHaveWritten(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// A write whose answer was lost: the object the watch then shows is this
// manager's only when its newest managedFields entry (status aside) is
// this manager's, from the time of the write.
func TestClaimUnansweredByManagedFields(t *testing.T) {
	sent := time.Date(2026, 12, 4, 22, 0, 10, 400e6, time.UTC)
	entry := func(manager, subresource string, at time.Time) metav1.ManagedFieldsEntry {
		mt := metav1.NewTime(at.Truncate(time.Second))
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: subresource, Time: &mt}
	}
	for _, tc := range []struct {
		name     string
		fields   []metav1.ManagedFieldsEntry
		want     bool
		inFlight bool // the watch event comes before the failed answer
	}{
		{"created by the write", []metav1.ManagedFieldsEntry{entry(FieldManager, "", sent)}, true, false},
		{"seen while its answer is awaited", []metav1.ManagedFieldsEntry{entry(FieldManager, "", sent)}, true, true},
		{"the DaemonSet controller's status since", []metav1.ManagedFieldsEntry{entry(FieldManager, "", sent), entry("kube-controller-manager", "status", sent.Add(3*time.Second))}, true, false},
		{"someone else wrote after", []metav1.ManagedFieldsEntry{entry(FieldManager, "", sent), entry("kubectl-edit", "", sent.Add(2*time.Second))}, false, false},
		{"someone else in the same second", []metav1.ManagedFieldsEntry{entry("kubectl-edit", "", sent), entry(FieldManager, "", sent)}, false, false},
		{"an older write of ours", []metav1.ManagedFieldsEntry{entry(FieldManager, "", sent.Add(-time.Minute))}, false, false},
		{"no managedFields", nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Manager{clock: clocktesting.NewFakeClock(sent)}
			m.sending()
			if !tc.inFlight {
				m.clock.(*clocktesting.FakeClock).Step(500 * time.Millisecond)
				m.answered(true) // the connection broke
			}
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: DaemonSetName, Namespace: Namespace, UID: "landed", Generation: 1, ManagedFields: tc.fields}}
			seen := core.Observation{UID: ds.UID, Generation: ds.Generation, WrittenAt: WrittenAt(ds)}
			if got := m.ClaimUnanswered(seen); got != tc.want {
				t.Fatalf("ClaimUnanswered = %v, want %v", got, tc.want)
			}
			if got := m.IsOwnWrite(ds.UID, ds.Generation); got != tc.want {
				t.Errorf("IsOwnWrite after the claim = %v, want %v", got, tc.want)
			}
			if tc.want && m.ClaimUnanswered(seen) {
				t.Errorf("a second object claimed for the same lost answer")
			}
		})
	}
}

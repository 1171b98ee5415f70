package runtimeextractor

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/insights-runtime-extractor/controller/pkg/internal/logcapture"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// forbiddenList is the API server's answer to a list that RBAC denies, as
// the Insights Operator's ServiceAccount gets it for pods and Events.
func forbiddenList(resource string) error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New(
		`User "system:serviceaccount:openshift-insights:operator" cannot list resource "`+resource+`" in API group "" in the namespace "`+resources.Namespace+`"`))
}

// Embedded with the host's RBAC as it ships, listing pods and Events in
// openshift-insights is forbidden. The diagnosis still gives the verdict on
// the counts, says which detail is missing and why, and asks once: one list
// and one log line per read, not one per diagnosis or per lookup of names.
func TestForbiddenDiagnosisReadsAreAskedOnceAndSaid(t *testing.T) {
	const deadline = 300 * time.Millisecond
	logged := logcapture.Klog(t)
	h := startWith(t, func(h *harness) {
		h.opts = append(h.opts, WithRolloutDeadline(deadline))
		for _, res := range []string{"pods", "events"} {
			h.api.Client.PrependReactor("list", res, func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, forbiddenList(res)
			})
		}
	})
	ds := h.waitStored("the DaemonSet", func(ds *appsv1.DaemonSet) bool { return ds != nil })
	createPods(t, h.api.Client, ds, "node-c")
	wantDenied := []string{status.DeniedPodsList, status.DeniedEventsList}

	// A stall: node-c's pod is still to be replaced. Under load the deadline may first pass on the
	// new DaemonSet's empty status (nothing not ready); these counts are progress, so the verdict
	// of the stall comes a deadline after them.
	h.setCounts(3, 2, 2)
	h.eventually("a RolloutStuck verdict of the stall", func() bool {
		s := h.ctrl.Status()
		return s.Stuck != nil && s.Stuck.NotReady == 1
	})
	s := h.ctrl.Status()
	if s.Stuck.NotReady != 1 || s.Stuck.Nodes != nil || s.Stuck.Warning != "" || !slices.Equal(s.Stuck.Denied, wantDenied) {
		t.Fatalf("stuck verdict %+v, want one node not ready, no names, no warning, denied %v", s.Stuck, wantDenied)
	}
	progressing := status.Conditions(s)[1] // one node of three: within maxUnavailable, not Degraded
	for _, want := range []string{"1 of 3 nodes not ready (node names unavailable: pods list forbidden)", "newest warning on the DaemonSet unavailable: events list forbidden"} {
		if !strings.Contains(progressing.Message, want) {
			t.Errorf("Progressing is %s %q, want it saying %q", progressing.Reason, progressing.Message, want)
		}
	}

	// Progress: rolled out, node-c's pod unavailable. Naming the node would
	// list pods again.
	h.setCounts(3, 3, 2)
	h.eventually("the names of the unavailable node said to be denied", func() bool {
		s := h.ctrl.Status()
		return s.Stuck == nil && s.UnavailableNodesDenied
	})
	if available := status.Conditions(h.ctrl.Status())[0]; !strings.HasSuffix(available.Message, "1 node has no available pod (within maxUnavailable 1); node names unavailable: pods list forbidden") {
		t.Errorf("Available is %s %q, want the count and the denial", available.Reason, available.Message)
	}

	// A second stall, diagnosed without asking again.
	h.setCounts(3, 2, 2)
	h.eventually("a second RolloutStuck verdict", func() bool { return h.ctrl.Status().Stuck != nil })
	if s := h.ctrl.Status(); !slices.Equal(s.Stuck.Denied, wantDenied) || s.Stuck.NotReady != 1 {
		t.Fatalf("second stuck verdict %+v, want one node not ready, denied %v", s.Stuck, wantDenied)
	}
	if n := podLists(h); n != 1 {
		t.Errorf("%d pod lists, want 1: a denied read is not asked again", n)
	}
	if n := listsOf(h, "events"); n != 1 {
		t.Errorf("%d Event lists, want 1: a denied read is not asked again", n)
	}
	out := logged()
	for _, read := range wantDenied {
		if n := deniedLines(out, read); n != 1 {
			t.Errorf("%d log lines saying %s is forbidden, want 1:\n%s", n, read, out)
		}
	}
}

// A denied read is asked again once its recheck has come, so that a
// grant shows without a restart; it is logged when it is denied first and
// when it is allowed again, not at each recheck. Other errors are not
// remembered.
func TestDeniedReadIsAskedAgainAfterTheRecheck(t *testing.T) {
	logged := logcapture.Klog(t)
	clk := testingclock.NewFakePassiveClock(time.Now())
	d := newDenials(clk)
	calls := 0
	var answer error
	read := func() error { calls++; return answer }
	try := func(step string, wantCalls int, wantDenied bool, wantErr error) {
		t.Helper()
		denied, err := d.try(status.DeniedPodsList, read)
		if calls != wantCalls || denied != wantDenied || !errors.Is(err, wantErr) {
			t.Fatalf("%s: %d calls, denied %v, error %v; want %d calls, denied %v, error %v", step, calls, denied, err, wantCalls, wantDenied, wantErr)
		}
	}

	answer = forbiddenList("pods")
	try("first denial", 1, true, nil)
	try("at once again", 1, true, nil)
	clk.SetTime(clk.Now().Add(deniedRecheckFirst - time.Second))
	try("just before the recheck", 1, true, nil)
	clk.SetTime(clk.Now().Add(time.Second))
	try("the recheck, still denied", 2, true, nil)
	try("after the recheck", 2, true, nil)
	if n := deniedLines(logged(), status.DeniedPodsList); n != 1 {
		t.Fatalf("%d log lines saying pods list is forbidden after a recheck, want 1:\n%s", n, logged())
	}

	answer = nil
	clk.SetTime(clk.Now().Add(deniedRecheckMax))
	try("the recheck, granted", 3, false, nil)
	try("granted", 4, false, nil)
	if !strings.Contains(logged(), "pods list in "+resources.Namespace+" is allowed again") {
		t.Errorf("no log line saying the grant:\n%s", logged())
	}

	refused := errors.New("connection refused")
	answer = refused
	try("another error", 5, false, refused)
	try("another error is not remembered", 6, false, refused)
}

func listsOf(h *harness, resource string) int {
	n := 0
	for _, a := range h.api.Client.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

// deniedLines counts the log lines that say read is forbidden. klog writes
// a warning to the output of each severity up to it, all of them the one
// buffer here: a line and its copy are one (timestamps tell lines apart).
func deniedLines(log, read string) int {
	lines := map[string]bool{}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, read+" in "+resources.Namespace+" is forbidden") {
			lines[line] = true
		}
	}
	return len(lines)
}

// Issue 33, defect 5: at install, RBAC is often bound seconds after the
// first request, so one 403 must not hide node names for an hour. A denied
// read is asked again after 30 s, then after twice as long each time it is
// denied again, up to deniedRecheckMax.
func TestDeniedReadIsRecheckedOnABackoff(t *testing.T) {
	logcapture.Klog(t)
	clk := testingclock.NewFakePassiveClock(time.Now())
	d := newDenials(clk)
	calls := 0
	read := func() error { calls++; return forbiddenList("pods") }
	d.try(status.DeniedPodsList, read)
	wait := 30 * time.Second
	for i := range 10 {
		clk.SetTime(clk.Now().Add(wait - time.Millisecond))
		d.try(status.DeniedPodsList, read)
		if calls != i+1 {
			t.Fatalf("recheck %d: asked again %s after the denial, want after %s", i+1, wait-time.Millisecond, wait)
		}
		clk.SetTime(clk.Now().Add(time.Millisecond))
		d.try(status.DeniedPodsList, read)
		if calls != i+2 {
			t.Fatalf("recheck %d: not asked again %s after the denial", i+1, wait)
		}
		wait = min(2*wait, deniedRecheckMax)
	}
	if wait != deniedRecheckMax {
		t.Fatalf("the recheck grew to %s in 10 denials, want %s", wait, deniedRecheckMax)
	}
}

package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
	"github.com/insights-runtime-extractor/controller/pkg/status"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// condView is one condition as these tests compare it: its transition time
// left out.
type condView struct {
	Status          configv1.ConditionStatus
	Reason, Message string
}

// condViews are the RuntimeExtractor* conditions on the ClusterOperator.
type condViews map[configv1.ClusterStatusConditionType]condView

func (v condViews) String() string {
	var b strings.Builder
	for _, t := range status.ConditionTypes {
		c, ok := v[t]
		if !ok {
			fmt.Fprintf(&b, "\n  %s absent", t)
			continue
		}
		fmt.Fprintf(&b, "\n  %s=%s %s: %s", t, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func (v condViews) equal(o condViews) bool {
	return len(v) == len(status.ConditionTypes) && maps.Equal(v, o)
}

// withVersion is v with every mention of version from replaced by to.
func (v condViews) withVersion(from, to string) condViews {
	out := condViews{}
	for t, c := range v {
		c.Message = strings.ReplaceAll(c.Message, from, to)
		out[t] = c
	}
	return out
}

func (e *env) ownConditions() condViews {
	out := condViews{}
	for _, t := range status.ConditionTypes {
		if c := e.condition(t); c != nil {
			out[t] = condView{c.Status, c.Reason, c.Message}
		}
	}
	return out
}

// settledConditions waits until the conditions satisfy cond and then stay
// the same for hold (a change the controller still has pending is written
// within runtimeextractor.StatusMaxDelay), and returns them.
func (e *env) settledConditions(what string, hold time.Duration, cond func(condViews) bool) condViews {
	e.t.Helper()
	var cur, last condViews
	var since time.Time
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		cur = e.ownConditions()
		switch {
		case !cond(cur):
			last = nil
			return false, nil
		case !cur.equal(last):
			last, since = cur, time.Now()
		}
		return time.Since(since) >= hold, nil
	})
	if err != nil {
		e.t.Fatalf("timed out waiting for %s; the conditions are:%s", what, cur)
	}
	return last
}

// TestUnreadyPodSameConditionsAfterRestartAndUpgrade holds the pod of one node
// Pending (a kwok stage that skips the node), so the DaemonSet is rolled out
// (every pod runs the current template) with one pod unavailable. A replica
// that has run since the first deploy, the same cluster seen by a restarted
// replica, and the version bump that follows must all report the same three
// conditions: rolled out, one node without an available pod, not Degraded.
// The rollout deadline is shortened (as in stuck_test.go) and passes after
// the bump: nothing is left to update, so RolloutStuck must never be reported.
func TestUnreadyPodSameConditionsAfterRestartAndUpgrade(t *testing.T) {
	const target = "4.22.1"
	deadline, err := time.ParseDuration(stuckDeadline)
	if err != nil {
		t.Fatal(err)
	}
	hold := runtimeextractor.StatusMaxDelay
	e := newEnv(t)
	ctx := context.Background()
	held := e.cluster.Nodes[len(e.cluster.Nodes)-1]
	if err := e.cluster.HoldPods(ctx, held); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.cluster.HoldPods(ctx); err != nil {
			t.Errorf("lift the kwok hold: %v", err)
		}
	})
	kubeconfig, _ := e.controllerAccountKubeconfig()
	opts := controllerOpts{kubeconfig: kubeconfig, args: []string{"--rollout-deadline", stuckDeadline}}
	recording, stopRecording := context.WithCancel(ctx)
	defer stopRecording()
	recorder := e.recordClusterOperator(recording)

	e.setConfig(enabledConfig)
	long := e.startController(opts)
	desired := int32(len(e.cluster.Nodes))
	e.waitDaemonSet("the rollout done with one pod held unready", func(ds *appsv1.DaemonSet) bool {
		return ds != nil && ds.Status.ObservedGeneration == ds.Generation && ds.Status.DesiredNumberScheduled == desired &&
			ds.Status.UpdatedNumberScheduled == desired && ds.Status.NumberAvailable == desired-1
	})
	before := e.settledConditions("the long-running replica's conditions: rolled out, one pod unavailable", hold, func(v condViews) bool {
		a, p, d := v[status.ConditionAvailable], v[status.ConditionProgressing], v[status.ConditionDegraded]
		return a.Status == configv1.ConditionTrue && a.Reason == status.ReasonPodsUnavailable && strings.Contains(a.Message, held) &&
			p.Status == configv1.ConditionFalse && d.Status == configv1.ConditionFalse
	})
	t.Logf("long-running replica, pod on %s held unready:%s", held, before)

	long.stop()
	e.clearConditions() // the restarted replica must write its own
	restarted := e.startController(opts)
	after := e.settledConditions("the restarted replica's conditions equal to the long-running one's", hold, before.equal)
	t.Logf("restarted replica, same cluster:%s", after)

	e.setClusterVersion(target)
	bumped := time.Now()
	e.waitDaemonSet("the DaemonSet at "+target, func(ds *appsv1.DaemonSet) bool {
		return ds != nil && ds.Annotations[resources.VersionAnnotation] == target
	})
	e.waitState(restarted, "Running")
	want := before.withVersion(testcluster.DefaultVersion, target)
	upgraded := e.settledConditions("the conditions after the bump equal to the long-running replica's, at "+target, hold, want.equal)
	t.Logf("after the version bump to %s:%s", target, upgraded)
	// The deadline passes with nothing to update, and the time to report a
	// stall: the conditions stay.
	for end := bumped.Add(deadline + statusQuiet); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if cur := e.ownConditions(); !cur.equal(want) {
			t.Fatalf("%s after the bump the conditions changed to:%s", time.Since(bumped).Round(100*time.Millisecond), cur)
		}
	}
	if v := restarted.stuckMetric(); v != 0 {
		t.Errorf("%s = %v with nothing to update, want 0", metricRolloutStuck, v)
	}
	stopRecording()
	versions, gaps := recorder.result()
	if gaps > 0 {
		t.Logf("the ClusterOperator recording has %d gaps", gaps)
	}
	for _, v := range degradedWith(versions, status.ReasonRolloutStuck) {
		t.Errorf("RolloutStuck reported at %s with nothing to update: %s", v.at.Format(time.TimeOnly), v.conditions[status.ConditionDegraded].Message)
	}
}

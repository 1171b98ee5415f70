package runtimeextractor

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// DefaultRolloutDeadline is how long a rollout may make no progress before
// RuntimeExtractorDegraded turns True with reason RolloutStuck.
const DefaultRolloutDeadline = 10 * time.Minute

// stuckNodes bounds the node names a RolloutStuck message lists.
const stuckNodes = 3

// diagnosisTimeout bounds the reads of a stuck rollout's pods and Events.
const diagnosisTimeout = 10 * time.Second

// rolloutProgress is what "progress" means: the updated or available counts
// of one generation of one object moving.
type rolloutProgress struct {
	uid                types.UID
	generation         int64
	updated, available int32
}

// rolloutWatch notices a rollout that makes no progress. It costs nothing
// while rollouts progress: pods and Events are read only once the deadline
// has passed, off the control loop. Owned by the Run goroutine.
type rolloutWatch struct {
	deadline time.Duration

	progress   rolloutProgress
	since      time.Time   // the last progress
	timer      *time.Timer // armed while waiting for progress
	diagnosing bool        // a diagnosis is under way
	result     chan stuckResult
	stuck      *status.RolloutStuck
}

// stuckResult is a diagnosis, for the progress it was made for.
type stuckResult struct {
	progress rolloutProgress
	stuck    *status.RolloutStuck
}

func newRolloutWatch(deadline time.Duration) *rolloutWatch {
	return &rolloutWatch{deadline: deadline, result: make(chan stuckResult, 1)}
}

// C fires when the deadline passed without progress.
func (w *rolloutWatch) C() <-chan time.Time {
	if w.timer == nil {
		return nil
	}
	return w.timer.C
}

// observe follows the rollout the controller waits for: ds in a rollout
// state, or nothing to wait for (ds nil). It reports whether the stuck
// verdict changed.
func (w *rolloutWatch) observe(state fsm.State, ds *appsv1.DaemonSet, now time.Time) bool {
	waiting := ds != nil && (state == fsm.StateDeploying || state == fsm.StateUpgrading || state == fsm.StateDrifted)
	if !waiting {
		return w.reset()
	}
	p := rolloutProgress{uid: ds.UID, generation: ds.Generation, updated: ds.Status.UpdatedNumberScheduled, available: ds.Status.NumberAvailable}
	if p == w.progress && (w.timer != nil || w.diagnosing || w.stuck != nil) {
		return false // no progress: the deadline, diagnosis or verdict stands
	}
	changed := w.reset()
	w.progress, w.since = p, now
	w.timer = time.NewTimer(w.deadline)
	return changed
}

// reset forgets the rollout; it reports whether a stuck verdict was cleared.
func (w *rolloutWatch) reset() bool {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.progress = rolloutProgress{}
	w.diagnosing = false
	cleared := w.stuck != nil
	w.stuck = nil
	return cleared
}

// expired starts the diagnosis of ds in the background; its result arrives
// on w.result.
func (w *rolloutWatch) expired(ctx context.Context, client kubernetes.Interface, ds *appsv1.DaemonSet, now time.Time) {
	w.timer, w.diagnosing = nil, true
	p, stalled := w.progress, now.Sub(w.since)
	ds = ds.DeepCopy()
	go func() {
		dctx, cancel := context.WithTimeout(ctx, diagnosisTimeout)
		defer cancel()
		s := diagnose(dctx, client, ds)
		s.For = stalled
		select {
		case w.result <- stuckResult{progress: p, stuck: s}:
		case <-ctx.Done():
		}
	}()
}

// accept takes a diagnosis if the rollout is still where it was diagnosed;
// it reports whether the verdict changed.
func (w *rolloutWatch) accept(r stuckResult) bool {
	if !w.diagnosing || r.progress != w.progress {
		return false // progress since: the diagnosis is stale
	}
	w.diagnosing, w.stuck = false, r.stuck
	return true
}

// diagnose names what holds the rollout up: the nodes whose pod is not ready
// and the newest warning Event the DaemonSet controller recorded. A failed
// read leaves its part out; the verdict stands on the counts alone.
func diagnose(ctx context.Context, client kubernetes.Interface, ds *appsv1.DaemonSet) *status.RolloutStuck {
	s := &status.RolloutStuck{NotReady: max(ds.Status.DesiredNumberScheduled-ds.Status.NumberAvailable, 0)}
	if ds.Status.UpdatedNumberScheduled < ds.Status.DesiredNumberScheduled {
		s.NotReady = max(s.NotReady, ds.Status.DesiredNumberScheduled-ds.Status.UpdatedNumberScheduled)
	}
	if selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector); err == nil {
		pods, err := client.CoreV1().Pods(ds.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if err != nil {
			klog.Warningf("diagnose stuck rollout: list pods: %v", err)
		} else {
			s.Nodes = notReadyNodes(pods.Items, ds)
		}
	}
	events, err := client.CoreV1().Events(ds.Namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.uid": string(ds.UID), "type": corev1.EventTypeWarning,
	}.String()})
	if err != nil {
		klog.Warningf("diagnose stuck rollout: list events: %v", err)
	} else if ev := newest(events.Items); ev != nil {
		s.Warning = fmt.Sprintf("%s: %s", ev.Reason, ev.Message)
	}
	return s
}

// notReadyNodes returns up to stuckNodes nodes (sorted) whose pod of ds is
// not ready or not of the current generation.
func notReadyNodes(pods []corev1.Pod, ds *appsv1.DaemonSet) []string {
	var nodes []string
	for i := range pods {
		pod := &pods[i]
		if pod.Spec.NodeName == "" || !ownedBy(pod, ds) || podReady(pod) {
			continue
		}
		nodes = append(nodes, pod.Spec.NodeName)
	}
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	if len(nodes) > stuckNodes {
		nodes = nodes[:stuckNodes]
	}
	return nodes
}

func ownedBy(pod *corev1.Pod, ds *appsv1.DaemonSet) bool {
	for _, ref := range pod.OwnerReferences {
		if ref.UID == ds.UID {
			return true
		}
	}
	return false
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// newest returns the Event seen last, or nil.
func newest(events []corev1.Event) *corev1.Event {
	var best *corev1.Event
	var bestAt time.Time
	for i := range events {
		at := events[i].LastTimestamp.Time
		if events[i].Series != nil {
			at = events[i].Series.LastObservedTime.Time
		}
		if at.IsZero() {
			at = events[i].EventTime.Time
		}
		if best == nil || at.After(bestAt) {
			best, bestAt = &events[i], at
		}
	}
	return best
}

package runtimeextractor

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

const (
	maxStuckNodes     = 3                // the node names a RolloutStuck message lists
	diagnosisTimeout  = 10 * time.Second // bounds the reads of a stuck rollout's pods and Events
	unavailableSettle = 5 * time.Second  // pods are read once the unavailable count held this long
)

// rolloutWatch notices a rollout that makes no progress, and names the nodes without an
// available pod once rolled out. Pods and Events are read off the loop. Owned by Run.
type rolloutWatch struct {
	deadline  time.Duration
	nodeNames bool // list pods to name nodes (WithNodeNames)

	clock      clock.Clock
	core       *core.State // follows the rollout's progress and deadline
	diagnosing bool        // a diagnosis is under way
	result     chan stuckResult
	stuck      *status.RolloutStuck

	unavailable unavailableLookup
	named       chan namedResult
	denied      *denials // shared by the diagnosis and the lookups
}

// unavailableKey: the names are read once per change of it, not per status update.
type unavailableKey struct {
	uid         types.UID
	generation  int64
	unavailable int32
}

type unavailableLookup struct {
	namedResult
	cancel context.CancelFunc // of a lookup under way; nil when none
}

type namedResult struct {
	key    unavailableKey
	nodes  []string // nil until read, and after a failed read
	denied bool     // RBAC forbids the lookup
}

type stuckResult struct {
	progress core.Rollout
	stuck    *status.RolloutStuck
}

func newRolloutWatch(progressDeadline time.Duration, nodeNames bool, clk clock.Clock, state *core.State) *rolloutWatch {
	return &rolloutWatch{deadline: progressDeadline, nodeNames: nodeNames, clock: clk, core: state,
		result: make(chan stuckResult, 1), named: make(chan namedResult, 1), denied: newDenials(clk)}
}

// track follows ds's rollout in an enabled state and reports whether the stuck verdict
// changed. The lookup of unavailable nodes runs in every state: conditions follow the cluster.
func (w *rolloutWatch) track(ctx context.Context, client kubernetes.Interface, state fsm.State, ds *appsv1.DaemonSet, now time.Time) bool {
	w.trackUnavailable(ctx, client, ds)
	// Updated but unavailable pods leave nothing to roll out: not stuck (issue 18).
	r := resources.RolloutOf(ds)
	var p core.Rollout // none
	if state.Enabled() && ds != nil && ds.DeletionTimestamp == nil && !r.Complete() {
		p = core.Rollout{UID: string(ds.UID), Generation: ds.Generation, Updated: r.Updated, Available: r.Available}
	}
	// Without progress the deadline, diagnosis or verdict stands.
	return w.core.FollowRollout(p, w.diagnosing || w.stuck != nil, w.deadline, now) && w.forget()
}

// reset is forget that also stops a lookup under way.
func (w *rolloutWatch) reset() {
	w.setUnavailable(unavailableKey{})
	w.forget()
}

// forget reports whether a stuck verdict was cleared.
func (w *rolloutWatch) forget() bool {
	cleared := w.stuck != nil
	w.diagnosing, w.stuck = false, nil
	return cleared
}

// trackUnavailable starts a lookup when a rolled-out ds's unavailable count changes to above
// 0; any other change drops the names.
func (w *rolloutWatch) trackUnavailable(ctx context.Context, client kubernetes.Interface, ds *appsv1.DaemonSet) {
	var key unavailableKey
	if r := resources.RolloutOf(ds); w.nodeNames && ds != nil && ds.DeletionTimestamp == nil && r.Complete() && r.Unavailable() > 0 {
		key = unavailableKey{uid: ds.UID, generation: ds.Generation, unavailable: r.Unavailable()}
	}
	if key == w.unavailable.key {
		return
	}
	w.setUnavailable(key)
	if key == (unavailableKey{}) {
		return
	}
	lctx, cancel := context.WithCancel(ctx)
	w.unavailable.cancel = cancel
	ds = ds.DeepCopy()
	go func() {
		defer recovered("the lookup of unavailable nodes")
		select {
		case <-w.clock.After(unavailableSettle):
		case <-lctx.Done():
			return
		}
		rctx, cancelRead := context.WithTimeout(lctx, diagnosisTimeout)
		var nodes []string
		denied, err := w.denied.try(status.DeniedPodsList, func() (err error) {
			nodes, err = notReadyNodesOf(rctx, client, ds)
			return err
		})
		cancelRead()
		if err != nil {
			klog.Warningf("name the nodes without an available pod: %v", err)
			return // the message goes without names
		}
		select {
		case w.named <- namedResult{key: key, nodes: nodes, denied: denied}:
		case <-lctx.Done():
		}
	}()
}

func (w *rolloutWatch) setUnavailable(key unavailableKey) {
	if w.unavailable.cancel != nil {
		w.unavailable.cancel()
	}
	w.unavailable = unavailableLookup{namedResult: namedResult{key: key}}
}

func (w *rolloutWatch) acceptNames(r namedResult) {
	if r.key != w.unavailable.key || w.unavailable.key == (unavailableKey{}) {
		return // the count moved since: stale
	}
	w.setUnavailable(r.key) // the lookup is over; release its context
	w.unavailable.namedResult = r
}

// expired diagnoses ds in the background; the result arrives on w.result.
func (w *rolloutWatch) expired(ctx context.Context, client kubernetes.Interface, ds *appsv1.DaemonSet, now time.Time) {
	w.diagnosing = true
	p, since := w.core.FollowedRollout()
	ds = ds.DeepCopy()
	go func() {
		defer recovered("the diagnosis of a stuck rollout")
		dctx, cancel := context.WithTimeout(ctx, diagnosisTimeout)
		defer cancel()
		s := diagnose(dctx, client, ds, w.nodeNames, w.denied)
		s.For = now.Sub(since)
		select {
		case w.result <- stuckResult{progress: p, stuck: s}:
		case <-ctx.Done():
		}
	}()
}

// accept reports whether the verdict changed.
func (w *rolloutWatch) accept(r stuckResult) bool {
	if p, _ := w.core.FollowedRollout(); !w.diagnosing || r.progress != p {
		return false // progress since: the diagnosis is stale
	}
	w.diagnosing, w.stuck = false, r.stuck
	return true
}

// diagnose names the nodes whose pod is not ready and the DaemonSet's newest warning Event. A
// failed read leaves its part out, a denied one is named; the verdict stands on the counts.
func diagnose(ctx context.Context, client kubernetes.Interface, ds *appsv1.DaemonSet, nodeNames bool, denied *denials) *status.RolloutStuck {
	r := resources.RolloutOf(ds)
	s := &status.RolloutStuck{NotReady: max(r.Unavailable(), r.Desired-r.Updated)} // unavailable, or not yet updated
	read := func(what string, f func() error) {
		switch forbidden, err := denied.try(what, f); {
		case forbidden:
			s.Denied = append(s.Denied, what)
		case err != nil:
			klog.Warningf("diagnose stuck rollout: %v", err)
		}
	}
	if nodeNames {
		read(status.DeniedPodsList, func() (err error) {
			s.Nodes, err = notReadyNodesOf(ctx, client, ds)
			return err
		})
	}
	read(status.DeniedEventsList, func() error {
		events, err := client.CoreV1().Events(ds.Namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.uid": string(ds.UID), "type": corev1.EventTypeWarning,
		}.String()})
		if err != nil {
			return fmt.Errorf("list events of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
		}
		if ev := newest(events.Items); ev != nil {
			s.Warning = fmt.Sprintf("%s: %s", ev.Reason, ev.Message)
		}
		return nil
	})
	return s
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

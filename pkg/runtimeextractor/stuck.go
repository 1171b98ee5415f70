package runtimeextractor

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	podPageSize       = 500              // a pod per node, up to 2,000: unpaged, tens of MB decoded at once in the host
	// A denied read is asked again after deniedRecheckFirst (RBAC is often bound late at install), doubling up to deniedRecheckMax.
	deniedRecheckFirst = 30 * time.Second
	deniedRecheckMax   = time.Hour // a host's shipped RBAC changes only on restart: only manual grants wait
)

// rolloutWatch, owned by Run, notices a stuck rollout and names the nodes lacking a pod; it reads them off the loop.
type rolloutWatch struct {
	deadline     time.Duration
	nodeNames    bool // list pods to name nodes (WithNodeNames)
	clock        clock.Clock
	core         *core.State // follows the rollout's progress and deadline
	diagnosing   bool        // a diagnosis is under way
	result       chan stuckResult
	stuck        *status.RolloutStuck
	unavailable  namedResult        // the current key and, once read, its names
	cancelLookup context.CancelFunc // of a lookup under way; a no-op when none
	named        chan namedResult
	denied       *denials // shared by the diagnosis and the lookups
}

// unavailableKey: the names are read once per change of it, not per status update.
type unavailableKey struct {
	uid         types.UID
	generation  int64
	unavailable int32
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
		result: make(chan stuckResult, 1), named: make(chan namedResult, 1), denied: newDenials(clk), cancelLookup: func() {}}
}

// track follows ds's rollout when enabled, reporting whether the stuck verdict changed; node lookups run in any state.
func (w *rolloutWatch) track(ctx context.Context, client kubernetes.Interface, state fsm.State, ds *appsv1.DaemonSet, now time.Time) bool {
	r, live := resources.RolloutOf(ds), ds != nil && ds.DeletionTimestamp == nil
	var key unavailableKey // names are looked up while a rolled-out ds's unavailable count is above 0
	if w.nodeNames && live && r.Complete() && r.Unavailable() > 0 {
		key = unavailableKey{uid: ds.UID, generation: ds.Generation, unavailable: r.Unavailable()}
	}
	if key != w.unavailable.key {
		w.lookUp(ctx, client, ds, key)
	}
	// Updated but unavailable pods leave nothing to roll out: not stuck (issue 18).
	var p core.Rollout // none
	if state.Enabled() && live && !r.Complete() {
		p = core.Rollout{UID: string(ds.UID), Generation: ds.Generation, Updated: r.Updated, Available: r.Available}
	}
	// Without progress the deadline, diagnosis or verdict stands.
	if !w.core.FollowRollout(p, w.diagnosing || w.stuck != nil, w.deadline, now) {
		return false
	}
	cleared := w.stuck != nil
	w.diagnosing, w.stuck = false, nil
	return cleared
}

// reset drops the verdict (a diagnosis under way goes stale) and the node names, stopping a lookup under way.
func (w *rolloutWatch) reset() {
	w.setUnavailable(namedResult{})
	w.diagnosing, w.stuck = false, nil
}

// lookUp drops the names of the previous key, and starts a lookup of key's unless it is zero.
func (w *rolloutWatch) lookUp(ctx context.Context, client kubernetes.Interface, ds *appsv1.DaemonSet, key unavailableKey) {
	w.setUnavailable(namedResult{key: key})
	if key == (unavailableKey{}) {
		return
	}
	lctx, cancel := context.WithCancel(ctx)
	w.cancelLookup = cancel
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

func (w *rolloutWatch) setUnavailable(r namedResult) {
	w.cancelLookup()
	w.unavailable, w.cancelLookup = r, func() {}
}

func (w *rolloutWatch) acceptNames(r namedResult) {
	if r.key == w.unavailable.key && r.key != (unavailableKey{}) { // else the count moved since: stale
		w.setUnavailable(r) // the lookup is over; release its context
	}
}

// expired diagnoses ds off the loop, for w.result: its not-ready nodes and newest warning, a denied read named.
func (w *rolloutWatch) expired(ctx context.Context, client kubernetes.Interface, ds *appsv1.DaemonSet, now time.Time) {
	w.diagnosing = true
	p, since := w.core.FollowedRollout()
	ds = ds.DeepCopy()
	go func() {
		defer recovered("the diagnosis of a stuck rollout")
		dctx, cancel := context.WithTimeout(ctx, diagnosisTimeout)
		defer cancel()
		r := resources.RolloutOf(ds)
		s := &status.RolloutStuck{NotReady: max(r.Unavailable(), r.Desired-r.Updated), For: now.Sub(since)} // unavailable, or not yet updated
		read := func(what string, f func() error) {
			switch forbidden, err := w.denied.try(what, f); {
			case forbidden:
				s.Denied = append(s.Denied, what)
			case err != nil:
				klog.Warningf("diagnose stuck rollout: %v", err)
			}
		}
		if w.nodeNames {
			read(status.DeniedPodsList, func() (err error) {
				s.Nodes, err = notReadyNodesOf(dctx, client, ds)
				return err
			})
		}
		read(status.DeniedEventsList, func() error {
			events, err := client.CoreV1().Events(ds.Namespace).List(dctx, metav1.ListOptions{FieldSelector: fields.Set{
				"involvedObject.uid": string(ds.UID), "type": corev1.EventTypeWarning,
			}.String()})
			if err != nil {
				return fmt.Errorf("list events of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
			}
			seen := func(ev corev1.Event) time.Time {
				at := ev.LastTimestamp.Time
				if ev.Series != nil {
					at = ev.Series.LastObservedTime.Time
				}
				if at.IsZero() {
					return ev.EventTime.Time
				}
				return at
			}
			if len(events.Items) > 0 { // the Event seen last, the first on a tie
				newest := slices.MaxFunc(events.Items, func(a, b corev1.Event) int { return seen(a).Compare(seen(b)) })
				s.Warning = fmt.Sprintf("%s: %s", newest.Reason, newest.Message)
			}
			return nil
		})
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

// notReadyNodesOf: up to maxStuckNodes nodes (sorted) whose pod of ds is not ready, paged.
func notReadyNodesOf(ctx context.Context, client kubernetes.Interface, ds *appsv1.DaemonSet) ([]string, error) {
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	opts := metav1.ListOptions{LabelSelector: selector.String(), Limit: podPageSize}
	owned := func(r metav1.OwnerReference) bool { return r.UID == ds.UID }
	var nodes []string
	ready := func(pod *corev1.Pod) bool { // the first Ready condition is True
		i := slices.IndexFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady })
		return i >= 0 && pod.Status.Conditions[i].Status == corev1.ConditionTrue
	}
	for {
		page, err := client.CoreV1().Pods(ds.Namespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list pods of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
		}
		for i := range page.Items {
			if pod := &page.Items[i]; pod.Spec.NodeName != "" && slices.ContainsFunc(pod.OwnerReferences, owned) && !ready(pod) {
				nodes = append(nodes, pod.Spec.NodeName)
			}
		}
		slices.Sort(nodes)
		nodes = slices.Compact(nodes)
		nodes = nodes[:min(len(nodes), maxStuckNodes)]
		if page.Continue == "" {
			return nodes, nil
		}
		opts.Continue = page.Continue
	}
}

// deniedWhat says what a denial of each read costs, for its log line.
var deniedWhat = map[string]string{
	status.DeniedPodsList:   "RolloutStuck and PodsUnavailable go without node names",
	status.DeniedEventsList: "RolloutStuck goes without the DaemonSet's newest warning (e.g. FailedCreate)",
}

// denials remembers the reads RBAC denied: a host lacking them pays one 403 and log line per read, not per diagnosis.
type denials struct {
	clock clock.PassiveClock

	mu     sync.Mutex
	denied map[string]denial // by read
}

type denial struct {
	at    time.Time     // when RBAC last denied it
	after time.Duration // when it is asked again, after at
}

func newDenials(clk clock.PassiveClock) *denials {
	return &denials{clock: clk, denied: map[string]denial{}}
}

// try runs f, the read named read, unless denied and not yet due a recheck; err is f's failure other than a denial.
func (d *denials) try(read string, f func() error) (denied bool, err error) {
	d.mu.Lock()
	last, known := d.denied[read]
	d.mu.Unlock()
	if known && d.clock.Since(last.at) < last.after {
		return true, nil
	}
	err = f()
	d.mu.Lock()
	defer d.mu.Unlock()
	prev, remembered := d.denied[read] // another read may have been denied meanwhile
	switch {
	case apierrors.IsForbidden(err):
		after := deniedRecheckFirst
		if remembered {
			after = min(2*prev.after, deniedRecheckMax)
		} else {
			klog.Warningf("%s in %s is forbidden, so %s; it is asked again in %s, then less and less often, up to once an hour. The host's RBAC lacks it: see docs/embedding.md: %v",
				read, resources.Namespace, deniedWhat[read], after, err)
		}
		d.denied[read] = denial{at: d.clock.Now(), after: after}
		return true, nil
	case err == nil && remembered:
		klog.Infof("%s in %s is allowed again", read, resources.Namespace)
		delete(d.denied, read)
	}
	return false, err
}

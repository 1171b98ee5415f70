package runtimeextractor

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/openshift/library-go/pkg/operator/events"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// Reasons of the controller's Events: one per change it makes to the
// DaemonSet, saying what and why, and one Warning per distinct failure. They
// go on the DaemonSet, so `kubectl describe` shows its history; once it is
// gone, on the Namespace.
const (
	// ReasonCreated: the DaemonSet was created (Normal).
	ReasonCreated = "RuntimeExtractorCreated"
	// ReasonUpdated: the DaemonSet was updated (Normal).
	ReasonUpdated = "RuntimeExtractorUpdated"
	// ReasonDeleted: the DaemonSet was deleted as insights-config disables it (Normal).
	ReasonDeleted = "RuntimeExtractorDeleted"
	// ReasonApplyFailed: applying the DaemonSet failed; it will be retried (Warning).
	ReasonApplyFailed = "RuntimeExtractorApplyFailed"
	// ReasonDeleteFailed: deleting the DaemonSet failed; it will be retried (Warning).
	ReasonDeleteFailed = "RuntimeExtractorDeleteFailed"
	// ReasonRolloutStuck: the rollout made no progress for the rollout
	// deadline (Warning).
	ReasonRolloutStuck = "RuntimeExtractorRolloutStuck"
	// ReasonTLSProfileUnknown: an apply could not read the cluster TLS profile
	// (Warning); recorded per apply, so the aggregated Event's count shows it lasts.
	ReasonTLSProfileUnknown = "RuntimeExtractorTLSProfileUnknown"
	// ReasonConflictingWriter: another writer keeps undoing the controller's
	// repairs, which back off (Warning).
	ReasonConflictingWriter = "RuntimeExtractorConflictingWriter"
)

// newEventRecorder returns client-go's asynchronous recorder and its stop:
// recording never waits for the API server, so Events stay off the repair path.
func newEventRecorder(ctx context.Context, client kubernetes.Interface, component string) (record.EventRecorder, func()) {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component}), broadcaster.Shutdown
}

type changeEvents struct {
	recorder record.EventRecorder
	warned   string // the last failure recorded; the same again is not
}

// namespaceRef stands for a DaemonSet that is gone. Its namespace stores the
// Event there, where the controller may write Events, not in "default".
var namespaceRef = &corev1.ObjectReference{Kind: "Namespace", APIVersion: "v1", Name: resources.Namespace, Namespace: resources.Namespace}

func (e *changeEvents) applied(ds *appsv1.DaemonSet, created bool, why string) {
	e.warned = ""
	ref := daemonSetRef(ds)
	if created {
		e.record(ref, corev1.EventTypeNormal, ReasonCreated, "created DaemonSet: "+why)
		return
	}
	e.record(ref, corev1.EventTypeNormal, ReasonUpdated, "updated DaemonSet: "+why)
}

func (e *changeEvents) deleted() {
	e.warned = ""
	e.record(namespaceRef, corev1.EventTypeNormal, ReasonDeleted,
		fmt.Sprintf("deleted DaemonSet %s: runtime extractor disabled by insights-config", resources.DaemonSetName))
}

// failed records a failure once, until something succeeds.
func (e *changeEvents) failed(on *appsv1.DaemonSet, reason, msg string) {
	if e.warned == reason+msg {
		return
	}
	e.warned = reason + msg
	e.record(onOrNamespace(on), corev1.EventTypeWarning, reason, msg)
}

// tlsUnknown leaves the failure memory alone: an apply failing meanwhile is still reported.
func (e *changeEvents) tlsUnknown(on *appsv1.DaemonSet, msg string) {
	e.record(onOrNamespace(on), corev1.EventTypeWarning, ReasonTLSProfileUnknown, msg)
}

// conflict records that a fight began; it leaves the failure memory alone.
func (e *changeEvents) conflict(on *appsv1.DaemonSet, msg string) {
	e.record(onOrNamespace(on), corev1.EventTypeWarning, ReasonConflictingWriter, msg)
}

func onOrNamespace(on *appsv1.DaemonSet) runtime.Object {
	if on == nil {
		return namespaceRef
	}
	return daemonSetRef(on)
}

// record caps the message as the conditions' are: an error can quote a whole insights-config.
func (e *changeEvents) record(ref runtime.Object, eventType, reason, msg string) {
	e.recorder.Event(ref, eventType, reason, status.CapMessage(msg))
}

// daemonSetRef needs only ds's identity, not the TypeMeta informer copies lack.
func daemonSetRef(ds *appsv1.DaemonSet) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		Kind: "DaemonSet", APIVersion: "apps/v1",
		Namespace: ds.Namespace, Name: ds.Name, UID: ds.UID, ResourceVersion: ds.ResourceVersion,
	}
}

// applyCause says why an apply that wrote was made.
type applyCause struct {
	transition fsm.Transition
	// repair: the apply undid someone else's change (core.State.Outstanding),
	// whatever event led to it.
	repair               bool
	drift                []DriftKind
	upgradeFrom, version string // upgradeFrom: the version before the current upgrade
	reenabled            bool   // this controller deleted the DaemonSet before
	tls                  string // the TLS arguments the apply moved kube-rbac-proxy to
	writers              []core.Edit
	unnamed              bool     // some of the drift no managedFields entry names
	restored             []string // what a repair put back (restoredFields)
}

func (c applyCause) String(created bool) string {
	at := ""
	if c.version != "" {
		at = " at version " + c.version
	}
	state := c.transition.To
	switch {
	case c.repair && created:
		return "recreated after it was deleted by someone else" + at
	case c.repair:
		return "repaired a change made by someone else (" + driftWords(c.drift) + restoredWords(c.restored) + ")" + editorsWords(c.drift, c.writers, c.unnamed)
	case state == fsm.StateUpgrading && c.upgradeFrom != "" && c.upgradeFrom != c.version:
		return fmt.Sprintf("version moved from %s to %s", c.upgradeFrom, c.version)
	case created && c.reenabled:
		return "runtime extractor re-enabled by insights-config" + at
	case created:
		return "first deploy" + at
	case c.transition.Event != nil && c.transition.Event.Name() == fsm.EventVersionChanged:
		return "brought in line with version " + c.version
	case c.tls != "":
		return "kube-rbac-proxy follows the cluster TLS profile: " + c.tls
	default:
		return "brought back to the desired spec (insights-config, images or TLS profile changed)"
	}
}

// driftWords says what drift kinds mean to an admin.
func driftWords(kinds []DriftKind) string {
	words := make([]string, 0, len(kinds))
	for _, k := range kinds {
		switch k {
		case DriftModified:
			words = append(words, "spec changed")
		case DriftMetadata:
			words = append(words, "owned label or annotation changed")
		case DriftDeleted:
			words = append(words, "deleted")
		default:
			words = append(words, string(k))
		}
	}
	return strings.Join(words, ", ")
}

// discardRecorder is the library-go recorder given to resourceapply: it
// records nothing, as the controller's own Events replace library-go's.
type discardRecorder struct{ component string }

var _ events.Recorder = discardRecorder{}

func (discardRecorder) Event(string, string)                          {}
func (discardRecorder) Eventf(string, string, ...any)                 {}
func (discardRecorder) Warning(string, string)                        {}
func (discardRecorder) Warningf(string, string, ...any)               {}
func (r discardRecorder) ComponentName() string                       { return r.component }
func (discardRecorder) Shutdown()                                     {}
func (r discardRecorder) WithContext(context.Context) events.Recorder { return r }
func (discardRecorder) ForComponent(c string) events.Recorder         { return discardRecorder{component: c} }
func (r discardRecorder) WithComponentSuffix(s string) events.Recorder {
	return discardRecorder{component: r.component + "-" + s}
}

// maxNamedEditors bounds the writers a message names; the rest are counted.
const maxNamedEditors = 3

// editorsWords says who made a repaired change; "" for a deletion only, which
// names no one.
func editorsWords(kinds []DriftKind, ws []core.Edit, unnamed bool) string {
	if len(ws) == 0 {
		if unnamed || slices.ContainsFunc(kinds, func(k DriftKind) bool { return k != DriftDeleted }) {
			return ", by a writer managedFields does not name"
		}
		return ""
	}
	names := make([]string, 0, maxNamedEditors)
	for _, w := range ws[:min(len(ws), maxNamedEditors)] {
		names = append(names, w.String())
	}
	out := ", changed by " + strings.Join(names, ", ")
	if n := len(ws) - maxNamedEditors; n > 0 {
		out += fmt.Sprintf(" and %d more", n)
	}
	if unnamed {
		out += " and a writer managedFields does not name"
	}
	return out
}

// driftSummary is what the log and the Event say about a drain's drift.
func driftSummary(kinds []DriftKind, ws []core.Edit, unnamed bool) string {
	if len(kinds) == 1 && kinds[0] == DriftDeleted {
		return "deleted by someone else"
	}
	return "changed by someone else (" + driftWords(kinds) + ")" + editorsWords(kinds, ws, unnamed)
}

// maxRestoredFields bounds the fields a repair's Event names; the rest are counted.
const maxRestoredFields = 4

// restoredWords is ": restored container extractor image, tolerations;
// removed container sidecar" for fields, "" for none.
func restoredWords(fields []string) string {
	if len(fields) == 0 {
		return ""
	}
	shown := fields[:min(len(fields), maxRestoredFields)]
	var put, removed []string
	for _, f := range shown {
		if name, ok := strings.CutPrefix(f, "removed "); ok {
			removed = append(removed, name)
		} else {
			put = append(put, f)
		}
	}
	var parts []string
	if len(put) > 0 {
		parts = append(parts, "restored "+strings.Join(put, ", "))
	}
	if len(removed) > 0 {
		parts = append(parts, "removed "+strings.Join(removed, ", "))
	}
	out := ": " + strings.Join(parts, "; ")
	if n := len(fields) - len(shown); n > 0 {
		out += fmt.Sprintf(" and %d more", n)
	}
	return out
}

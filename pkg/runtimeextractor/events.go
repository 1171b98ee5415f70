package runtimeextractor

import (
	"context"
	"fmt"

	"github.com/openshift/library-go/pkg/operator/events"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// Event reasons: one per change to the DaemonSet (what and why), a Warning per distinct failure; on it or its Namespace.
const (
	ReasonCreated      = "RuntimeExtractorCreated"      // the DaemonSet was created (Normal)
	ReasonUpdated      = "RuntimeExtractorUpdated"      // the DaemonSet was updated (Normal)
	ReasonDeleted      = "RuntimeExtractorDeleted"      // the DaemonSet was deleted as insights-config disables it (Normal)
	ReasonApplyFailed  = "RuntimeExtractorApplyFailed"  // applying the DaemonSet failed; it will be retried (Warning)
	ReasonDeleteFailed = "RuntimeExtractorDeleteFailed" // deleting the DaemonSet failed; it will be retried (Warning)
	ReasonRolloutStuck = "RuntimeExtractorRolloutStuck" // the rollout made no progress for the rollout deadline (Warning)
	// ReasonConflictingWriter: another writer keeps undoing the controller's repairs, which back off (Warning).
	ReasonConflictingWriter = "RuntimeExtractorConflictingWriter"
	// ReasonTLSProfileUnknown: an apply could not read the cluster TLS profile (Warning, per apply).
	ReasonTLSProfileUnknown = "RuntimeExtractorTLSProfileUnknown"
)

// newEventRecorder returns client-go's asynchronous recorder and its stop: Events stay off the repair path.
func newEventRecorder(ctx context.Context, client kubernetes.Interface, component string) (record.EventRecorder, func()) {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component}), broadcaster.Shutdown
}

type changeEvents struct {
	recorder record.EventRecorder
	warned   string // the last failure recorded; the same again is not
}

func (e *changeEvents) applied(ds *appsv1.DaemonSet, created bool, why string) {
	e.warned = ""
	reason, verb := ReasonUpdated, "updated"
	if created {
		reason, verb = ReasonCreated, "created"
	}
	e.record(ds, corev1.EventTypeNormal, reason, verb+" DaemonSet: "+why)
}

func (e *changeEvents) deleted() {
	e.warned = ""
	e.record(nil, corev1.EventTypeNormal, ReasonDeleted,
		fmt.Sprintf("deleted DaemonSet %s: runtime extractor disabled by insights-config", resources.DaemonSetName))
}

// failed records a failure once, until something succeeds.
func (e *changeEvents) failed(on *appsv1.DaemonSet, reason, msg string) {
	if e.warned == reason+msg {
		return
	}
	e.warned = reason + msg
	e.record(on, corev1.EventTypeWarning, reason, msg)
}

// warn records a Warning every time, leaving failed's memory alone: an apply failing meanwhile is still reported.
func (e *changeEvents) warn(on *appsv1.DaemonSet, reason, msg string) {
	e.record(on, corev1.EventTypeWarning, reason, msg)
}

// record records on the DaemonSet by identity (informer copies lack TypeMeta), or on the Namespace
// when on is nil; the message is capped, as an error can quote a whole insights-config.
func (e *changeEvents) record(on *appsv1.DaemonSet, eventType, reason, msg string) {
	ref := &corev1.ObjectReference{Kind: "Namespace", APIVersion: "v1", Name: resources.Namespace, Namespace: resources.Namespace}
	if on != nil {
		ref = &corev1.ObjectReference{Kind: "DaemonSet", APIVersion: "apps/v1",
			Namespace: on.Namespace, Name: on.Name, UID: on.UID, ResourceVersion: on.ResourceVersion}
	}
	e.recorder.Event(ref, eventType, reason, status.CapMessage(msg))
}

// discardRecorder is the library-go recorder given to resourceapply: our Events replace its.
type discardRecorder struct{ component string }

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

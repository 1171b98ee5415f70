// Package fakeapi gives client-go's fake clientset the API server behaviour the
// controller depends on for DaemonSets: UIDs, resourceVersion conflicts, a
// generation that moves only when the spec changes, an immutable selector, a
// status subresource that never touches the spec, and the defaults the server
// adds. It also fakes the discovery of OpenShift's config API. Tests only.
package fakeapi

import (
	"fmt"
	"strconv"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// DaemonSets is the DaemonSet resource.
var DaemonSets = appsv1.SchemeGroupVersion.WithResource("daemonsets")

// Server wraps a fake clientset with API-server semantics for DaemonSets.
type Server struct {
	Client *fake.Clientset

	mu     sync.Mutex
	serial int
}

// New returns a Server holding objs.
func New(objs ...runtime.Object) *Server {
	s := &Server{Client: fake.NewClientset(objs...)}
	s.Client.PrependReactor("create", "daemonsets", s.create)
	s.Client.PrependReactor("update", "daemonsets", s.update)
	s.Client.PrependReactor("delete", "daemonsets", s.DeleteReactor)
	return s
}

func (s *Server) next() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.serial++
	return strconv.Itoa(s.serial)
}

func (s *Server) create(action clienttesting.Action) (bool, runtime.Object, error) {
	ds := action.(clienttesting.CreateAction).GetObject().(*appsv1.DaemonSet).DeepCopy()
	ApplyDefaults(ds)
	ds.UID = types.UID("uid-" + s.next())
	ds.Generation = 1
	// The field manager goes to the tracker, which keeps managedFields as
	// the API server does (it would say "unknown" for every writer).
	var opts metav1.CreateOptions
	if a, ok := action.(clienttesting.CreateActionImpl); ok {
		opts = a.GetCreateOptions()
	}
	return s.store(ds, func() error {
		return s.Client.Tracker().Create(DaemonSets, ds, ds.Namespace, opts)
	})
}

func (s *Server) update(action clienttesting.Action) (bool, runtime.Object, error) {
	ds := action.(clienttesting.UpdateAction).GetObject().(*appsv1.DaemonSet).DeepCopy()
	obj, err := s.Client.Tracker().Get(DaemonSets, ds.Namespace, ds.Name)
	if err != nil {
		return true, nil, err
	}
	old := obj.(*appsv1.DaemonSet)
	if ds.ResourceVersion != "" && ds.ResourceVersion != old.ResourceVersion {
		return true, nil, apierrors.NewConflict(appsv1.Resource("daemonsets"), ds.Name,
			fmt.Errorf("resourceVersion %q is not the current %q", ds.ResourceVersion, old.ResourceVersion))
	}
	if action.GetSubresource() == "status" {
		status := ds.Status
		ds = old.DeepCopy()
		ds.Status = status
	} else {
		if err := validateUpdate(old, ds); err != nil {
			return true, nil, err
		}
		ApplyDefaults(ds)
		ds.UID, ds.Generation, ds.Status = old.UID, old.Generation, old.Status
		if !equality.Semantic.DeepEqual(old.Spec, ds.Spec) {
			ds.Generation++
		}
		if old.DeletionTimestamp == nil && ds.DeletionTimestamp != nil {
			ds.Generation++ // the API server marks a deletion held by finalizers so
		}
		// An update that changes nothing is not stored, as the API server
		// skips the write when the encoded object is unchanged: no new
		// resourceVersion, no watch event.
		ds.ResourceVersion = old.ResourceVersion
		if equality.Semantic.DeepEqual(old, ds) {
			return true, old.DeepCopy(), nil
		}
	}
	var opts metav1.UpdateOptions
	if a, ok := action.(clienttesting.UpdateActionImpl); ok {
		opts = a.GetUpdateOptions()
	}
	return s.store(ds, func() error {
		return s.Client.Tracker().Update(DaemonSets, ds, ds.Namespace, opts)
	})
}

// store gives ds a new resourceVersion, writes it to the tracker with write
// and answers as the reactor of the write request.
func (s *Server) store(ds *appsv1.DaemonSet, write func() error) (bool, runtime.Object, error) {
	ds.ResourceVersion = s.next()
	if err := write(); err != nil {
		return true, nil, err
	}
	return true, ds.DeepCopy(), nil
}

// validateUpdate rejects what the API server's DaemonSet validation rejects
// on an update and a test may provoke: a selector change, 422 Invalid with
// the cause on field spec.selector.
func validateUpdate(old, ds *appsv1.DaemonSet) error {
	if equality.Semantic.DeepEqual(old.Spec.Selector, ds.Spec.Selector) {
		return nil
	}
	return apierrors.NewInvalid(appsv1.SchemeGroupVersion.WithKind("DaemonSet").GroupKind(), ds.Name, field.ErrorList{
		field.Invalid(field.NewPath("spec", "selector"), ds.Spec.Selector, apimachineryvalidation.FieldImmutableErrorMsg),
	})
}

// DeleteReactor honours a UID precondition, as the API server does (the tracker
// ignores DeleteOptions).
func (s *Server) DeleteReactor(action clienttesting.Action) (bool, runtime.Object, error) {
	del := action.(clienttesting.DeleteAction)
	pre := del.GetDeleteOptions().Preconditions
	if pre == nil || pre.UID == nil {
		return false, nil, nil
	}
	obj, err := s.Client.Tracker().Get(DaemonSets, del.GetNamespace(), del.GetName())
	if err != nil {
		return true, nil, err
	}
	if uid := obj.(*appsv1.DaemonSet).UID; uid != *pre.UID {
		return true, nil, apierrors.NewConflict(appsv1.Resource("daemonsets"), del.GetName(),
			fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *pre.UID, uid))
	}
	return false, nil, nil // the tracker deletes
}

// Create stores ds as a create request would, without recording an action:
// for tests that stage what another actor did.
func (s *Server) Create(ds *appsv1.DaemonSet) (*appsv1.DaemonSet, error) {
	return react(s.create, clienttesting.NewCreateAction(DaemonSets, ds.Namespace, ds))
}

// Update stores ds as an update request would, without recording an action.
func (s *Server) Update(ds *appsv1.DaemonSet) (*appsv1.DaemonSet, error) {
	return react(s.update, clienttesting.NewUpdateAction(DaemonSets, ds.Namespace, ds))
}

// UpdateStatus stores ds's status as the status subresource would (the
// DaemonSet controller's write), without recording an action.
func (s *Server) UpdateStatus(ds *appsv1.DaemonSet) (*appsv1.DaemonSet, error) {
	return react(s.update, clienttesting.NewUpdateSubresourceAction(DaemonSets, "status", ds.Namespace, ds))
}

// react runs reactor on action directly, so the client records no action.
func react(reactor clienttesting.ReactionFunc, action clienttesting.Action) (*appsv1.DaemonSet, error) {
	_, obj, err := reactor(action)
	if err != nil {
		return nil, err
	}
	return obj.(*appsv1.DaemonSet), nil
}

// Stored returns the DaemonSet the server holds, or nil.
func (s *Server) Stored(namespace, name string) (*appsv1.DaemonSet, error) {
	obj, err := s.Client.Tracker().Get(DaemonSets, namespace, name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read tracker: %w", err)
	}
	return obj.(*appsv1.DaemonSet), nil
}

// Requests counts recorded API requests: reads (get/list/watch) and writes.
type Requests struct {
	Reads, Writes int
	Verbs         []string
}

// Count returns the requests recorded since the last ClearActions.
func (s *Server) Count() Requests {
	var r Requests
	for _, a := range s.Client.Actions() {
		r.Verbs = append(r.Verbs, a.GetVerb())
		switch a.GetVerb() {
		case "get", "list", "watch":
			r.Reads++
		default:
			r.Writes++
		}
	}
	return r
}

// ApplyDefaults sets the defaults the API server adds to a DaemonSet that a
// manifest leaves out, so stored objects are supersets of the desired one, as
// in a real cluster.
func ApplyDefaults(ds *appsv1.DaemonSet) {
	if ds.Spec.RevisionHistoryLimit == nil {
		ds.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	}
	pod := &ds.Spec.Template.Spec
	if pod.RestartPolicy == "" {
		pod.RestartPolicy = corev1.RestartPolicyAlways
	}
	if pod.DNSPolicy == "" {
		pod.DNSPolicy = corev1.DNSClusterFirst
	}
	if pod.SchedulerName == "" {
		pod.SchedulerName = corev1.DefaultSchedulerName
	}
	if pod.SecurityContext == nil {
		pod.SecurityContext = &corev1.PodSecurityContext{}
	}
	if pod.EnableServiceLinks == nil {
		pod.EnableServiceLinks = ptr.To(true)
	}
	pod.DeprecatedServiceAccount = pod.ServiceAccountName
	for i := range pod.Containers {
		c := &pod.Containers[i]
		if c.TerminationMessagePath == "" {
			c.TerminationMessagePath = corev1.TerminationMessagePathDefault
		}
	}
	for i := range pod.Volumes {
		v := &pod.Volumes[i]
		if v.ConfigMap != nil && v.ConfigMap.DefaultMode == nil {
			v.ConfigMap.DefaultMode = ptr.To(corev1.ConfigMapVolumeSourceDefaultMode)
		}
		if v.Secret != nil && v.Secret.DefaultMode == nil {
			v.Secret.DefaultMode = ptr.To(corev1.SecretVolumeSourceDefaultMode)
		}
	}
}
